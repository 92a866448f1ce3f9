"""The import contract: which room may import which, read from the code's own imports.

Keel's layers are `keel.api` → `keel.worker` → `keel.activities` → `keel.workflows`;
an arrow never points back up. Workflow code is deterministic, so `keel.workflows`
imports nothing that talks to the world and reads no environment. A surface (HTTP,
A2A, MCP, LangGraph, AG-UI, the CLI, the console) is a sibling of the others, never
built on one, and holds the one service of `keel.api.core` and nothing behind it: no
store, no Temporal client, no audit log, no event hub (`keel.api.events` is the live
stream the service hands out), nothing from beside the service (`service.parts`,
`app.state`). It may name the rows a store returns (its pydantic models), never the
store. And every import names the `keel` namespace, never a bare `api` or `workflows`
that another installed package could shadow.

Each rule reads every module with `ast` (nothing is imported). What breaks a rule
today is listed in `ALLOWED` with the reason; the list only shrinks, and an entry
that no longer matches a real import fails too, so it stays true. The rooms these
rules keep apart are described in `docs/architecture.md`.
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
# Surfaces are siblings over the service: none builds on another. The HTTP app mounts
# them all; what they share is the HTTP transport's caller and service dependencies,
# conditional GETs, and the status and headers an HTTP answer carries for a refusal
# (A2A's and MCP's HTTP transports answer those before their protocol starts).
MOUNTS = ("keel.api.http.app",)
SHARED_TRANSPORT = (
    "keel.api.http.deps",
    "keel.api.http.conditional",
    "keel.api.http.errors.headers_of",
    "keel.api.http.errors.status_of",
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
_CLUSTER_SETUP = (
    "`keel setup temporal` prepares the cluster a service needs (its namespace and search "
    "attributes) before any service can start, so it talks to Temporal itself."
)
ALLOWED: dict[tuple[str, str, str], str] = {
    ("surface", "keel.api.cli.setup", "temporalio.client.Client"): _CLUSTER_SETUP,
    ("surface", "keel.api.cli.setup", "keel.worker.temporal_client.connect"): _CLUSTER_SETUP,
    ("sibling", "keel.api.cli.local_stack", "keel.api.http.app.create_app"): (
        "`keel dev` runs the HTTP app in-process beside the worker: the CLI starts the API."
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
        surface = next((s for s in SURFACES if under(module, s)), None)
        for imp in imports_of(root, path):
            own, target = layer_of(imp.module), layer_of(imp.target)
            if own is not None and target is not None and target > own:
                found.append(("layer", imp))
            if workflow and any(under(imp.target, io) for io in IO_MODULES):
                found.append(("workflow-io", imp))
            if (
                surface
                and module not in MOUNTS
                and any(under(imp.target, s) for s in SURFACES if s != surface)
                and not any(under(imp.target, t) for t in SHARED_TRANSPORT)
            ):
                found.append(("sibling", imp))
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
        "api/mcp_server/tools.py": (
            "from . import results\nfrom ..core.context import CoreParts\n"
            "from keel.api.http.errors import detail_of, status_of\n"
        ),
        "api/agui/routes.py": (
            "from keel.api.langgraph.adapter import LangGraphAdapter\n"
            "from keel.api.http.deps import CurrentUser\n"
        ),
        "api/http/app.py": "from keel.api.agui import router\n",
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
        ("sibling", "keel.api.mcp_server.tools", "keel.api.http.errors.detail_of"),
        ("sibling", "keel.api.agui.routes", "keel.api.langgraph.adapter.LangGraphAdapter"),
        ("door", "keel.api.http.routers.runs", "app.state.event_hub"),
    }
