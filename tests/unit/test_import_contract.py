"""The import contract: which room may import which, read from the code's own imports.

Keel's layers are `keel.api` → `keel.worker` → `keel.activities` → `keel.workflows`;
an arrow never points back up. Workflow code is deterministic, so `keel.workflows`
imports nothing that talks to the world and reads no environment. A surface (HTTP,
A2A, MCP, LangGraph, AG-UI, the CLI, the console) holds the one service of
`keel.api.core` and nothing behind it: no store, no Temporal client, no audit log,
no event hub (`keel.api.events` is the live stream the service hands out), and it
takes nothing from beside the service (`service.parts`, `app.state`). It may name
the rows a store returns (its pydantic models), never the store. And every import
names the `keel` namespace, never a bare `api` or `workflows` that another installed
package could shadow.

Each rule reads every module with `ast` (nothing is imported). What breaks a rule
today is listed in `ALLOWED` with the reason; the list only shrinks, and an entry
that no longer matches a real import fails too, so it stays true.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
LAYERS = ("workflows", "activities", "worker", "api")  # bottom to top
SURFACES = (
    "keel.api.http",
    "keel.api.a2a",
    "keel.api.mcp_server",
    "keel.api.langgraph",
    "keel.api.agui",
    "keel.api.cli",
    "keel.api.console",
)
# What a surface reaches only through the service: stores, the audit log, Temporal.
BEHIND_THE_DOOR = (
    "keel.activities.store",
    "keel.api.core.audit_trail",
    "keel.api.core.context",
    "keel.api.events.hub.EventHub",
    "keel.api.events.stream.EventReads",
    "keel.worker.temporal_client",
    "temporalio.client",
)
# How surfaces name the service they hold, and what of `app.state` is the door itself.
SERVICE_NAMES = {"service", "_service", "keel", "service()"}
STATE_DOOR = {"service"}
# What talks to the world: workflow code imports none of it (activities do the I/O).
IO_MODULES = (
    "psycopg",
    "psycopg_pool",
    "httpx",
    "openai",
    "anthropic",
    "mcp",
    "socket",
    "ssl",
    "subprocess",
    "asyncio.subprocess",
    "urllib.request",
    "http.client",
    "requests",
    "aiohttp",
    "sqlite3",
    "shutil",
    "tempfile",
    "keel.worker.config",
)
# Reads of the process's environment and the OS, spelt as attributes of their module.
IO_ATTRIBUTES = {
    ("os", "environ"),
    ("os", "getenv"),
    ("os", "system"),
    ("os", "popen"),
    ("asyncio", "create_subprocess_exec"),
    ("asyncio", "create_subprocess_shell"),
    ("asyncio", "open_connection"),
}

# Known breaks: (rule, importing module, imported name) -> why it stands for now.
# Remove an entry when its import goes; add one only with a reason a reader accepts.
_ASSEMBLY = (
    "The HTTP app assembles the service itself: it opens the store, the audit log, "
    "Temporal and the event hub in its lifespan instead of asking the core for a service."
)
_OUTAGE = (
    "Each surface tells a Postgres outage (a 503) from a bug by the store's exception "
    "types instead of the core raising a domain error for it."
)
_LIVE = (
    "The event hub and the shared event reads reach the surface beside the service "
    "(app.state) instead of the service handing out a run's live stream."
)
_CONSOLE_READS = (
    "Usage and tool outputs are read through the store's console reads, not the service."
)
ALLOWED: dict[tuple[str, str, str], str] = {
    ("surface", "keel.api.a2a.errors", "keel.activities.store.outage.is_store_outage"): _OUTAGE,
    ("surface", "keel.api.http.errors", "keel.activities.store.outage.STORE_OUTAGES"): _OUTAGE,
    ("surface", "keel.api.http.errors", "keel.activities.store.outage.is_store_outage"): _OUTAGE,
    ("surface", "keel.api.http.routers.system", "keel.activities.store.outage.is_store_outage"): (
        "/health tells a store outage from a bug by the store's exception types."
    ),
    ("surface", "keel.api.http.routers.system", "keel.activities.store.run_store.Store"): (
        "/readyz pings the store's pool itself."
    ),
    ("surface", "keel.api.http.app", "keel.activities.store.audit.AuditLog"): _ASSEMBLY,
    ("surface", "keel.api.http.app", "keel.activities.store.console_reads.ConsoleReads"): _ASSEMBLY,
    ("surface", "keel.api.http.app", "keel.activities.store.interaction_store.InteractionStore"): (
        _ASSEMBLY
    ),
    ("surface", "keel.api.http.app", "keel.activities.store.run_store.Store"): _ASSEMBLY,
    ("surface", "keel.api.http.app", "keel.activities.store.session_store.SessionStore"): _ASSEMBLY,
    ("surface", "keel.api.http.app", "keel.api.core.audit_trail.ApiAudit"): _ASSEMBLY,
    ("surface", "keel.api.http.app", "keel.api.core.context.CoreParts"): _ASSEMBLY,
    ("surface", "keel.api.http.app", "keel.api.events.hub.EventHub"): _ASSEMBLY,
    ("surface", "keel.api.http.app", "keel.api.events.stream.EventReads"): _ASSEMBLY,
    ("surface", "keel.api.http.app", "keel.worker.temporal_client.connect"): _ASSEMBLY,
    ("surface", "keel.api.http.deps", "keel.activities.store.console_reads.ConsoleReads"): (
        _CONSOLE_READS
    ),
    (
        "surface",
        "keel.api.http.metrics",
        "keel.activities.store.interaction_store.InteractionStore",
    ): ("The API's metrics count pending interactions straight from their store."),
    ("surface", "keel.api.http.routers.events", "keel.api.events.hub.EventHub"): _LIVE,
    ("surface", "keel.api.http.routers.events", "keel.api.events.stream.EventReads"): _LIVE,
    ("surface", "keel.api.langgraph.adapter", "keel.api.events.hub.EventHub"): _LIVE,
    ("surface", "keel.api.langgraph.adapter", "keel.api.events.stream.EventReads"): _LIVE,
    ("surface", "keel.api.mcp_server.endpoint", "keel.api.events.hub.EventHub"): (
        "MCP's resource notifications subscribe to the event hub it is handed beside the service."
    ),
    ("surface", "keel.api.mcp_server.run_changes", "keel.api.events.hub.EventHub"): (
        "MCP's resource notifications subscribe to the event hub it is handed beside the service."
    ),
    ("door", "keel.api.a2a.admission", "service.parts"): (
        "A2A admission reads the agent catalog through the service's parts."
    ),
    ("door", "keel.api.a2a.handler", "service.parts"): (
        "The A2A handler reads runs, interactions and settings from the service's parts."
    ),
    ("door", "keel.api.a2a.routes", "service.parts"): (
        "The agent cards read the catalog (and when it was loaded) through the service's parts."
    ),
    ("door", "keel.api.agui.routes", "app.state.event_hub"): (
        "AG-UI builds a LangGraph adapter from the event hub on app.state."
    ),
    ("door", "keel.api.agui.routes", "app.state.event_reads"): (
        "AG-UI builds a LangGraph adapter from the event reads on app.state."
    ),
    ("door", "keel.api.console.sign_in", "app.state.audit"): (
        "The sign-in audits a refused token through the audit trail on app.state."
    ),
    ("door", "keel.api.console.sign_in", "app.state.auth_config"): (
        "The sign-in reads the auth mode from app.state."
    ),
    ("door", "keel.api.console.sign_in", "app.state.console_sessions"): (
        "Console cookie sessions live on app.state beside the service."
    ),
    ("door", "keel.api.console.sign_in", "app.state.verifier"): (
        "The sign-in verifies the pasted token with the verifier on app.state."
    ),
    ("door", "keel.api.http.deps", "app.state.console_reads"): (
        "Usage and tool outputs are read through console reads on app.state."
    ),
    ("door", "keel.api.http.deps", "app.state.console_sessions"): (
        "Console cookie sessions live on app.state beside the service."
    ),
    ("door", "keel.api.http.deps", "service.parts"): (
        "A refused console cookie is audited through the service's audit part."
    ),
    ("door", "keel.api.http.routers.admin", "service.parts"): (
        "Audit reads and tenant usage come from the audit log and store parts."
    ),
    ("door", "keel.api.http.routers.events", "app.state.event_hub"): (
        "The SSE route takes the event hub from app.state."
    ),
    ("door", "keel.api.http.routers.events", "app.state.event_reads"): (
        "The SSE route takes the shared event reads from app.state."
    ),
    ("door", "keel.api.http.routers.events", "service.parts"): (
        "The SSE route hands the run store to the stream."
    ),
    ("door", "keel.api.http.routers.inbox", "service.parts"): (
        "The inbox reads pending interactions from their store part."
    ),
    ("door", "keel.api.http.routers.system", "service.parts"): (
        "Health pings Temporal and the store parts itself."
    ),
    ("door", "keel.api.http.routers.webhooks", "service.parts"): (
        "The signing-secret route reads settings and writes its own audit entry."
    ),
    ("door", "keel.api.langgraph.adapter", "service.parts"): (
        "The LangGraph adapter reads settings and hands the run store to the event stream."
    ),
    ("door", "keel.api.langgraph.routes", "app.state.event_hub"): (
        "The LangGraph adapter is built from the event hub on app.state."
    ),
    ("door", "keel.api.langgraph.routes", "app.state.event_reads"): (
        "The LangGraph adapter is built from the event reads on app.state."
    ),
    ("door", "keel.api.mcp_server.server", "service.parts"): (
        "MCP lists agents from the service's catalog part."
    ),
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # what it imports, dotted (module.name for a from-import)
    line: int


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["keel", *parts])


def source_files(root: Path, *folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (root / f).rglob("*.py") if ".venv" not in p.parts)


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def imports_of(root: Path, path: Path) -> list[Import]:
    """Every import of a module, wherever it stands (functions and TYPE_CHECKING too)."""
    module = module_name(root, path)
    found: list[Import] = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importing module's package
                package = module.split(".")[: None if path.name == "__init__.py" else -1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            found += [Import(module, f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return found


def io_attributes_of(root: Path, path: Path) -> list[Import]:
    """`os.environ`, `os.getenv(...)`, `asyncio.create_subprocess_exec(...)`, ..."""
    module = module_name(root, path)
    return [
        Import(module, f"{node.value.id}.{node.attr}", node.lineno)
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and (node.value.id, node.attr) in IO_ATTRIBUTES
    ]


def side_doors_of(root: Path, path: Path) -> list[Import]:
    """What a surface takes from beside the service: `service.parts...`, `app.state.x`."""
    module = module_name(root, path)
    found: list[Import] = []
    for node in ast.walk(_tree(path)):
        if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
            continue
        holder = node.value
        named = _name(holder)
        if isinstance(holder, ast.Call):
            named = f"{_name(holder.func)}()"
        app_state = named == "state" and (
            isinstance(holder, ast.Name) or _name(getattr(holder, "value", None)) == "app"
        )  # `request.app.state.x`, or `state.x` after `state = request.app.state`
        if node.attr in {"parts", "_parts"} and named in SERVICE_NAMES:
            found.append(Import(module, f"service.{node.attr}", node.lineno))
        elif app_state and node.attr not in STATE_DOOR:
            found.append(Import(module, f"app.state.{node.attr}", node.lineno))
    return found


def _name(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer_of(name: str) -> int | None:
    parts = name.split(".")
    if len(parts) >= 2 and parts[0] == "keel" and parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return None


def is_row(root: Path, target: str) -> bool:
    """Whether `keel.activities.store.x.Name` is a row model (a pydantic class) of `x`."""
    module, _, name = target.rpartition(".")
    path = root.joinpath(*module.split(".")[1:]).with_suffix(".py")
    if not path.is_file():
        return False
    classes = {n.name: n for n in _tree(path).body if isinstance(n, ast.ClassDef)}

    def model(cls: str, seen: frozenset[str] = frozenset()) -> bool:
        node = classes.get(cls)
        if node is None or cls in seen:
            return False
        bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
        return "BaseModel" in bases or any(model(b, seen | {cls}) for b in bases)

    return model(name)


def breaks(root: Path) -> list[tuple[str, Import]]:
    """Every (rule, import) of the code under `root` that breaks a rule, listed or not."""
    found: list[tuple[str, Import]] = []
    for path in source_files(root, *LAYERS):
        module = module_name(root, path)
        workflow = under(module, "keel.workflows")
        surface = any(under(module, s) for s in SURFACES)
        for imp in imports_of(root, path):
            own, target = layer_of(imp.module), layer_of(imp.target)
            if own is not None and target is not None and target > own:
                found.append(("layer", imp))
            if workflow and any(under(imp.target, io) for io in IO_MODULES):
                found.append(("workflow-io", imp))
            if (
                surface
                and any(under(imp.target, b) for b in BEHIND_THE_DOOR)
                and not (under(imp.target, "keel.activities.store") and is_row(root, imp.target))
            ):
                found.append(("surface", imp))
        if workflow:
            found += [("workflow-io", imp) for imp in io_attributes_of(root, path)]
        if surface:
            found += [("door", imp) for imp in side_doors_of(root, path)]
    return found


def key(rule: str, imp: Import) -> tuple[str, str, str]:
    return (rule, imp.module, imp.target)


def test_rules_hold_except_the_listed_breaks() -> None:
    unlisted = [
        f"{rule}: {imp.module} (line {imp.line}) imports {imp.target}"
        for rule, imp in breaks(ROOT)
        if key(rule, imp) not in ALLOWED
    ]
    assert not unlisted, "Imports that break the contract:\n" + "\n".join(unlisted)


def test_every_listed_break_still_exists() -> None:
    present = {key(rule, imp) for rule, imp in breaks(ROOT)}
    stale = [k for k in ALLOWED if k not in present]
    assert not stale, f"Listed breaks that are gone; delete them from ALLOWED: {stale}"


@pytest.mark.parametrize("folder", [*LAYERS, "tests", "bench", "examples"])
def test_imports_name_the_keel_namespace(folder: str) -> None:
    bare = [
        f"{path.relative_to(ROOT)}:{imp.line} imports {imp.target}"
        for path in source_files(ROOT, folder)
        for imp in imports_of(ROOT, path)
        if imp.target.split(".")[0] in LAYERS
    ]
    assert not bare, "Imports without the keel namespace:\n" + "\n".join(bare)


def test_each_rule_catches_a_module_written_to_break_it(tmp_path: Path) -> None:
    """The rules run on a small tree of modules that break them, so none passes vacuously."""
    files = {
        "workflows/run/loop.py": (
            "import os\nfrom keel.activities.llm import step\nimport httpx\n"
            "from keel.worker.config.settings import Settings\nkey = os.environ['K']\n"
        ),
        "workflows/models.py": "from pydantic import BaseModel\n",
        "activities/store/rows.py": (
            "from pydantic import BaseModel\nclass Row(BaseModel): ...\n"
            "class Wide(Row): ...\nclass RowStore: ...\n"
        ),
        "activities/llm/step.py": "from keel.api.core import runs\n",
        "api/http/routers/runs.py": (
            "from keel.activities.store.rows import Row, Wide, RowStore\n"
            "from keel.api.core.service import KeelService\n"
            "from temporalio.client import Client\n"
            "async def f(service, request, message):\n"
            "    await service.parts.store.ping()\n"
            "    request.app.state.event_hub\n"
            "    request.state.principal, message.parts\n"
        ),
        "api/mcp_server/tools.py": "from . import results\nfrom ..core.context import CoreParts\n",
        "api/core/runs.py": "from keel.activities.store.rows import RowStore\n",
    }
    for name, code in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(code)
    found = {(rule, imp.module, imp.target) for rule, imp in breaks(tmp_path)}
    assert found == {
        ("layer", "keel.workflows.run.loop", "keel.activities.llm.step"),
        ("layer", "keel.workflows.run.loop", "keel.worker.config.settings.Settings"),
        ("workflow-io", "keel.workflows.run.loop", "keel.worker.config.settings.Settings"),
        ("workflow-io", "keel.workflows.run.loop", "httpx"),
        ("workflow-io", "keel.workflows.run.loop", "os.environ"),
        ("layer", "keel.activities.llm.step", "keel.api.core.runs"),
        ("surface", "keel.api.http.routers.runs", "keel.activities.store.rows.RowStore"),
        ("surface", "keel.api.http.routers.runs", "temporalio.client.Client"),
        ("surface", "keel.api.mcp_server.tools", "keel.api.core.context.CoreParts"),
        ("door", "keel.api.http.routers.runs", "service.parts"),
        ("door", "keel.api.http.routers.runs", "app.state.event_hub"),
    }
