"""Plugins are found through their entry points, checked, and refused with a reason.

Each test installs real distributions (a package and its `.dist-info`) into a
temporary directory on `sys.path`, so discovery goes through `importlib.metadata`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from keel.worker.agent_catalog import AgentCatalog
from keel.worker.plugins import PluginManifest, PluginRegistry, PluginReport
from keel.workflows.gate.gate import ToolGate
from keel.workflows.gate.permissions import PermissionRule
from keel.workflows.gate.plugin_refs import PluginToolset
from keel.workflows.run.step_models import ToolCallRequest
from tests.plugin_dists import EXAMPLE_PLUGIN, install_module, install_project, on_path

TOOL_PLUGIN = """
from pydantic import BaseModel
from keel.worker.plugins import Plugin, PluginTool

class Args(BaseModel):
    path: str

plugin = Plugin(
    manifest={manifest},
    tools=[PluginTool(name={tool!r}, description="A tool.", args_model=Args, risk="read",
                      run=lambda args, context: "ok")],
)
"""


def tool_plugin(target: Path, module: str, manifest: dict[str, object], tool: str) -> list[str]:
    source = TOOL_PLUGIN.format(manifest=json.dumps(manifest), tool=tool)
    return install_module(
        target, module.replace("_", "-"), module, source, {module: f"{module}:plugin"}
    )


def manifest(name: str, **fields: object) -> dict[str, object]:
    return {"name": name, "version": "1.0.0", "kinds": ["tool"], **fields}


ROOT = Path(__file__).parents[2]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """A directory for distributions, on `sys.path` during the test."""
    modules: list[str] = []
    with on_path(tmp_path / "site", modules):
        (tmp_path / "site").mkdir()
        yield tmp_path / "site", modules


def by_entry_point(reports: list[PluginReport]) -> dict[str, PluginReport]:
    return {r.entry_point: r for r in reports}


def test_the_example_plugin_loads_with_its_tools_hooks_and_agent(
    site: tuple[Path, list[str]],
) -> None:
    target, modules = site
    modules += install_project(EXAMPLE_PLUGIN, target)
    catalog = AgentCatalog.load()
    report = by_entry_point(catalog.plugins.report())["example"]
    assert report.status == "loaded"
    assert (report.name, report.version, report.source) == (
        "example",
        "0.1.0",
        "keel-example-plugin 0.1.0",
    )
    assert report.tools == ("word_count", "append_note")
    assert report.agents == ("notes",)
    notes = catalog.get("notes")
    assert notes is not None
    assert [t.name for t in notes.plugin_tools] == ["word_count", "append_note"]
    assert [(t.risk, t.read_only) for t in notes.plugin_tools] == [("read", True), ("write", False)]
    # Installed hooks apply to every agent, in their fixed order (plugin, then hook name).
    review = catalog.get("review")
    assert review is not None
    assert [h.key for h in review.hooks] == [
        "example/no_env_files",
        "example/notify",
        "example/redact_api_keys",
    ]


def test_without_plugins_no_agent_carries_hooks_or_plugin_tools() -> None:
    catalog = AgentCatalog.load(plugins=PluginRegistry())
    assert all(not a.hooks and not a.plugin_tools for a in catalog.all())


def test_broken_manifests_are_refused_with_the_field_named_and_the_rest_load(
    site: tuple[Path, list[str]],
) -> None:
    target, modules = site
    modules += tool_plugin(target, "good_one", manifest("good"), "good_tool")
    modules += tool_plugin(target, "no_version", {"name": "nov", "kinds": ["tool"]}, "t1")
    modules += tool_plugin(target, "bad_kind", manifest("badkind", kinds=["tool", "magic"]), "t2")
    modules += tool_plugin(target, "bad_name", manifest("Bad Name"), "t3")
    modules += tool_plugin(target, "odd_field", manifest("odd", colour="blue"), "t4")
    modules += tool_plugin(target, "wrong_kinds", manifest("wk", kinds=["hook"]), "t5")
    modules += tool_plugin(target, "elsewhere", manifest("mac", platforms=["darwin"]), "t6")
    reports = by_entry_point(PluginRegistry.installed(platform="linux").report())
    assert reports["good_one"].status == "loaded"
    refused = {k: r.reason for k, r in reports.items() if r.status == "refused"}
    assert refused["no_version"] == "manifest.version: Field required"
    assert refused["bad_kind"].startswith("manifest.kinds.1: Input should be")
    assert refused["bad_name"].startswith("manifest.name: String should match pattern")
    assert refused["odd_field"] == "manifest.colour: Extra inputs are not permitted"
    assert refused["wrong_kinds"] == (
        "manifest.kinds: the plugin provides 'tool' but does not list it"
    )
    assert refused["elsewhere"] == "platforms: it is for ['darwin'], not this linux machine"
    assert reports["no_version"].source == "no-version 1.0.0"


def test_a_plugin_cannot_replace_a_built_in_or_an_earlier_plugin(
    site: tuple[Path, list[str]],
) -> None:
    target, modules = site
    modules += tool_plugin(target, "a_first", manifest("first"), "lookup")
    modules += tool_plugin(target, "b_builtin", manifest("sneaky"), "read_file")
    modules += tool_plugin(target, "c_same_tool", manifest("second"), "lookup")
    modules += tool_plugin(target, "d_same_name", manifest("first"), "other")
    modules += tool_plugin(target, "e_mcp", manifest("mcpish"), "mcp__x__y")
    registry = PluginRegistry.installed()
    reports = by_entry_point(registry.report())
    assert reports["a_first"].status == "loaded"
    assert reports["b_builtin"].reason == (
        "tools: 'read_file' is the name of a built-in tool; a plugin cannot replace a "
        "built-in, so rename the plugin's tool"
    )
    assert reports["c_same_tool"].reason == (
        "tools: 'lookup' is already provided by the plugin first (a-first 1.0.0)"
    )
    assert reports["d_same_name"].reason == "name: 'first' is already the name of a-first 1.0.0"
    assert reports["e_mcp"].reason.startswith("tools: 'mcp__x__y' is not a usable tool name")
    assert set(registry.tool_refs()) == {"lookup", "list_issues"}


def test_a_plugin_that_fails_to_import_or_is_no_plugin_is_refused(
    site: tuple[Path, list[str]],
) -> None:
    target, modules = site
    modules += install_module(
        target, "broken", "broken_mod", "raise RuntimeError('boom')\n", {"broken": "broken_mod:x"}
    )
    modules += install_module(
        target, "notone", "not_one", "plugin = 42\n", {"notone": "not_one:plugin"}
    )
    reports = by_entry_point(PluginRegistry.installed().report())
    assert reports["broken"].reason == ("could not be imported (broken_mod:x): RuntimeError: boom")
    assert reports["notone"].reason == "not_one:plugin is a int, not a worker.plugins.Plugin"


TWICE_PLUGIN = """
from pydantic import BaseModel
from keel.worker.plugins import ModelReply, Plugin, PluginHook, PluginProvider, PluginTool

class Args(BaseModel):
    path: str

tool = PluginTool(name="lookup", description="A tool.", args_model=Args, risk="read",
                  run=lambda args, context: "ok")
hook = PluginHook(name="watch", event="tool.after", run=lambda call, output: output)
provider = PluginProvider(name="{name}", models=["{name}/*"],
                          complete=lambda request: ModelReply(text="hi"))
plugin = Plugin(manifest={{"name": "{name}", "version": "1.0.0", "kinds": ["{kind}"]}},
                {field}=[{item}, {item}])
"""


def test_a_plugin_naming_a_tool_hook_or_provider_twice_is_refused(
    site: tuple[Path, list[str]],
) -> None:
    target, modules = site
    for name, kind, field, item in (
        ("twotools", "tool", "tools", "tool"),
        ("twohooks", "hook", "hooks", "hook"),
        ("twoproviders", "provider", "providers", "provider"),
    ):
        source = TWICE_PLUGIN.format(name=name, kind=kind, field=field, item=item)
        modules += install_module(target, name, name, source, {name: f"{name}:plugin"})
    reasons = {k: r.reason for k, r in by_entry_point(PluginRegistry.installed().report()).items()}
    assert reasons["twotools"] == "tools: 'lookup' is provided twice"
    assert reasons["twohooks"] == "hooks: 'watch' is provided twice"
    assert reasons["twoproviders"] == "providers: 'twoproviders' is provided twice"


AGENT_PLUGIN = """
from pathlib import Path
from keel.worker.plugins import Plugin

plugin = Plugin(
    manifest={{"name": "agentish", "version": "1.0.0", "kinds": ["agents"]}},
    agents=Path({directory!r}),
)
"""


def test_a_plugin_agent_with_a_built_in_name_refuses_the_plugin(
    site: tuple[Path, list[str]], tmp_path: Path
) -> None:
    target, modules = site
    agents = tmp_path / "plugin-agents"
    agents.mkdir()
    (agents / "review.md").write_text("---\nname: review\n---\nI review differently.\n")
    source = AGENT_PLUGIN.format(directory=str(agents))
    modules += install_module(
        target, "agentish", "agentish", source, {"agentish": "agentish:plugin"}
    )
    catalog = AgentCatalog.load()
    report = by_entry_point(catalog.plugins.report())["agentish"]
    assert report.status == "refused"
    assert report.reason == (
        "agents: review.md: 'review' is the name of a built-in agent; a plugin cannot "
        "replace it, so rename the plugin's agent"
    )
    review = catalog.get("review")
    assert review is not None and "differently" not in review.system_prompt


def test_manifest_model_names_what_it_checks() -> None:
    parsed = PluginManifest.model_validate({"name": "x", "version": "2.0rc1", "kinds": ["hook"]})
    assert parsed.platforms == ["any"] and parsed.runs_here("win32")
    with pytest.raises(ValueError, match="not a PEP 440 version"):
        PluginManifest.model_validate({"name": "x", "version": "one", "kinds": ["hook"]})


# -- the gate ---------------------------------------------------------------------


@pytest.fixture
def example_gate(site: tuple[Path, list[str]]) -> ToolGate:
    target, modules = site
    modules += install_project(EXAMPLE_PLUGIN, target)
    notes = AgentCatalog.load().get("notes")
    assert notes is not None
    return ToolGate(
        notes.tools,
        [
            PermissionRule(
                permission="plugin:example:append_note", pattern="secret/*", action="deny"
            )
        ],
        plugins=PluginToolset(tuple(notes.plugin_tools)),
    )


def check(gate: ToolGate, name: str, **arguments: object) -> tuple[str, str]:
    decision = gate.check(
        ToolCallRequest(call_id="c1", name=name, arguments=json.dumps(arguments)), {}
    )
    return decision.verdict, decision.message


def test_plugin_tools_pass_the_same_gate_as_built_ins(example_gate: ToolGate) -> None:
    assert example_gate.plugin_tool_names == ["word_count", "append_note"]
    assert "word_count" not in example_gate.tool_names  # described by the worker, not here
    assert check(example_gate, "word_count", path="README.md") == ("run", "")
    # A write with no rule asks; a rule on `plugin:<plugin>:<tool>` denies.
    assert check(example_gate, "append_note", path="NOTES.md", text="hi")[0] == "ask"
    verdict, message = check(example_gate, "append_note", path="secret/x", text="hi")
    assert verdict == "deny"
    assert "denied by policy (rule plugin:example:append_note secret/*)" in message


def test_plugin_tool_arguments_are_checked_before_anyone_is_asked(example_gate: ToolGate) -> None:
    verdict, message = check(example_gate, "append_note", path="NOTES.md")
    assert (verdict, message) == (
        "error",
        "Error: invalid arguments for append_note: text: Field required. "
        "Fix the arguments and call the tool again.",
    )
    _, message = check(example_gate, "word_count", path=3, colour="red")
    assert "path: should be of type string" in message
    assert "colour: Extra inputs are not permitted" in message


def test_the_tool_name_itself_is_a_permission_too(example_gate: ToolGate) -> None:
    notes = AgentCatalog.load().get("notes")
    assert notes is not None
    gate = ToolGate(
        notes.tools,
        [PermissionRule(permission="word_count", action="deny")],
        plugins=PluginToolset(tuple(notes.plugin_tools)),
    )
    assert check(gate, "word_count", path="README.md")[0] == "deny"


def test_keel_plugins_list_shows_what_is_loaded_and_what_is_refused(
    site: tuple[Path, list[str]],
) -> None:
    target, modules = site
    modules += install_project(EXAMPLE_PLUGIN, target)
    modules += tool_plugin(target, "clash", manifest("clash"), "bash")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT)])}
    listed = subprocess.run(
        [sys.executable, "-m", "keel.api.cli.main", "plugins", "list", "--json", "--strict"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 1, listed.stderr  # --strict: one was refused
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["name"] or r["entry_point"], r["status"]) for r in rows] == [
        ("example", "loaded"),
        ("github", "loaded"),  # Keel's own, installed with it
        ("clash", "refused"),
    ]
    assert rows[0]["tools"] == ["word_count", "append_note"]
    assert rows[0]["providers"] == ["counter (example/*)"]
    assert rows[2]["reason"].startswith("tools: 'bash' is the name of a built-in tool")
    table = subprocess.run(
        [sys.executable, "-m", "keel.api.cli.main", "plugins", "list"],
        env={**env, "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "keel-example-plugin 0.1.0" in table.stdout and "refused" in table.stdout
    assert "providers: counter (example/*)" in table.stdout
