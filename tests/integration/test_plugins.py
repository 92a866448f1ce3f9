"""Plugins end to end: the example plugin installed, a real worker, model and Postgres.

Its tools run as activities through the gate, rules and approvals; its hooks deny,
redact and notify; a hook that keeps failing is retried, then refuses the call; and a
broken plugin installed beside it is refused while the worker starts anyway.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.worker.agent_catalog import AgentCatalog
from keel.worker.config.settings import Settings
from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn
from keel.workflows import timeouts
from keel.workflows.gate.permissions import PermissionRule
from keel.workflows.run.agent_spec import AgentSpec
from tests.conftest import in_process_worker
from tests.integration.runs import start_run
from tests.integration.test_approvals import executions
from tests.integration.test_mcp_tools import approve, call, history_text, pending, tool_messages
from tests.plugin_dists import example_and, install_module, on_path

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c"

# A hook that always fails, on `search_code` only; it counts its attempts.
FRAGILE = """
from keel.worker.plugins import Plugin, PluginHook

ATTEMPTS = []

def judge(call):
    ATTEMPTS.append(call.tool)
    raise ConnectionError("the policy service is down")

plugin = Plugin(
    manifest={"name": "fragile", "version": "1.0.0", "kinds": ["hook"]},
    hooks=[PluginHook(name="policy_service", event="tool.before", run=judge,
                      tools="search_code")],
)
"""
# A hook that wants a person to see every listing, though the rules allow reads.
ASKER = """
from keel.worker.plugins import BeforeDecision, Plugin, PluginHook

plugin = Plugin(
    manifest={"name": "asker", "version": "1.0.0", "kinds": ["hook"]},
    hooks=[PluginHook(name="listings", event="tool.before", tools="list_files",
                      run=lambda call: BeforeDecision(action="ask", reason="reviewed"))],
)
"""
# A tool.after hook on read_file that always fails.
WITHHOLDER = """
from keel.worker.plugins import Plugin, PluginHook

def boom(call, output):
    raise RuntimeError("no scanner")

plugin = Plugin(
    manifest={"name": "withholder", "version": "1.0.0", "kinds": ["hook"]},
    hooks=[PluginHook(name="boom", event="tool.after", run=boom, tools="read_file")],
)
"""
BROKEN = 'from worker.plugins import Plugin\nplugin = Plugin(manifest={"name": "broken"})\n'


@pytest.fixture
def installed(tmp_path: Path) -> Iterator[Path]:
    """The example plugin, a fragile hook and a broken plugin, installed for one test."""
    plugins = {
        "fragile": ("fragile_hook", FRAGILE),
        "broken": ("broken_plugin", BROKEN),
        "asker": ("asker_hook", ASKER),
    }
    with example_and(tmp_path, plugins) as site:
        yield site


def agent(name: str, *rules: PermissionRule) -> AgentSpec:
    # The scripts here play the model turn by turn: no coverage plan takes turns first.
    spec = AgentCatalog.load(coverage_plans=False).get(name)
    assert spec is not None
    return spec.model_copy(update={"permissions": [*spec.permissions, *rules]})


async def audit_of(database_url: str, run_id: str) -> list[dict[str, Any]]:
    async with await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row) as conn:
        cur = await conn.execute(
            "SELECT action, subject, detail FROM audit_log WHERE subject LIKE %s ORDER BY id",
            (f"{run_id}/%",),
        )
        return list(await cur.fetchall())


async def events_text(database_url: str, run_id: str) -> str:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute("SELECT data::text FROM events WHERE run_id = %s", (run_id,))
        return "\n".join(row[0] for row in await cur.fetchall())


async def test_plugin_tools_run_as_activities_ask_when_they_write_and_obey_deny_rules(
    installed: Path,
    temporal_client: Client,
    store: Store,
    workspace: Path,
    database_url: str,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        call("word_count", path="README.md"),
                        call("append_note", path="NOTES.md", text="README measured"),
                    ]
                ),
                Turn(tool_calls=[call("append_note", path="secret/keys.md", text="x")]),
                Turn(content="Measured and noted."),
            ]
        )
    )
    settings = settings_for(llm, workspace)
    deny = PermissionRule(permission="plugin:example:*", pattern="secret/*", action="deny")
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace, spec=agent("notes", deny))
        asked = await pending(handle)
        # A write with no rule asks, and the model has the plugin's own schema.
        assert (asked.tool, asked.risk, asked.subject) == ("append_note", "write", "NOTES.md")
        offered = {t["function"]["name"]: t["function"] for t in llm.last_request(0)["tools"]}
        assert offered["append_note"]["description"].startswith("Append one line")
        assert offered["append_note"]["parameters"]["required"] == ["path", "text"]
        assert not (workspace / "NOTES.md").exists()
        await approve(handle, asked)
        result = await handle.result()

    assert result.status == "completed"
    first, second = tool_messages(llm, 1), tool_messages(llm, 2)
    assert first == ["README.md: 1 lines, 2 words, 10 characters", "Appended one line to NOTES.md."]
    assert (workspace / "NOTES.md").read_text() == "README measured\n"
    assert "denied by policy (rule plugin:example:* secret/*)" in second[-1]
    assert not (workspace / "secret").exists()
    # Both ran as the plugin tool activity; the write was claimed once, as built-ins are.
    assert (await history_text(handle)).count('"run_plugin_tool"') >= 2
    assert await executions(database_url, result.run_id) == 1
    approved = [
        a
        for a in await audit_of(database_url, result.run_id)
        if a["action"].startswith("interaction")
    ]
    assert approved, "the approval was not audited"


async def test_hooks_deny_redact_notify_and_a_failing_hook_refuses_the_call(
    installed: Path,
    temporal_client: Client,
    store: Store,
    workspace: Path,
    tmp_path: Path,
    database_url: str,
    scripted: StartLLM,
    settings_for: MakeSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    notified = tmp_path / "notified.jsonl"
    monkeypatch.setenv("KEEL_EXAMPLE_NOTIFY_FILE", str(notified))
    (workspace / ".env").write_text(f"OPENAI_API_KEY={SECRET}\n")
    (workspace / "config.txt").write_text(f"endpoint = https://api.example\nkey = {SECRET}\n")
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        call("read_file", path=".env"),
                        call("read_file", path="config.txt"),
                    ]
                ),
                Turn(tool_calls=[call("search_code", pattern="endpoint")]),
                Turn(content="Done."),
            ]
        )
    )
    settings = settings_for(llm, workspace)
    catalog = AgentCatalog.load()
    reports = {r.entry_point: r for r in catalog.plugins.report()}
    assert reports["broken"].status == "refused"
    assert "manifest.version: Field required" in reports["broken"].reason
    import fragile_hook

    async with in_process_worker(temporal_client, store, settings):  # starts despite `broken`
        handle = await start_run(temporal_client, settings, workspace, spec=agent("review"))
        result = await handle.result()

    assert result.status == "completed"
    env, config = tool_messages(llm, 1)
    assert env == (
        "Error: read_file was refused by the hook example/no_env_files: .env files hold "
        "secrets; they are not for agents to touch. Do not retry it unchanged."
    )
    assert SECRET not in config and "key = [redacted]" in config
    assert config.endswith("[example/redact_api_keys] 1 API key(s) were redacted from this output.")
    # The secret reached neither the model, the stored events nor the history.
    assert SECRET not in json.dumps(llm.last_request(2))
    assert SECRET not in await events_text(database_url, result.run_id)
    assert SECRET not in await history_text(handle)

    search = tool_messages(llm, 2)[-1]
    assert search.startswith("Error: this call did not run: the tool.before hooks that must judge")
    assert "the policy service is down" in search
    assert fragile_hook.ATTEMPTS == ["search_code"] * timeouts.HOOK_ATTEMPTS

    audit = await audit_of(database_url, result.run_id)
    before = [a["detail"] for a in audit if a["action"] == "hook.tool_before"]
    assert {"hook": "example/no_env_files", "action": "deny"}.items() <= before[0].items()
    # .env denied, config.txt allowed, search_code allowed by the example (then the
    # fragile hook failed): each decision audited once, however often it was retried.
    assert [d["action"] for d in before] == ["deny", "allow", "allow"]
    after = [a["detail"] for a in audit if a["action"] == "hook.tool_after"]
    assert [(d["tool"], d["replaced"]) for d in after] == [("read_file", True)]
    ended = [json.loads(line) for line in notified.read_text().splitlines()]
    assert ended == [
        {"run_id": result.run_id, "status": "completed", "stop_reason": "final_answer"}
    ]


async def test_a_before_hook_can_make_an_allowed_read_ask_a_person(
    installed: Path,
    temporal_client: Client,
    store: Store,
    workspace: Path,
    database_url: str,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(turns=[Turn(tool_calls=[call("list_files", pattern="*.md")]), Turn(content="Ok.")])
    )
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace, spec=agent("review"))
        asked = await pending(handle)
        assert (asked.kind, asked.tool, asked.risk) == ("confirm", "list_files", "read")
        await approve(handle, asked)
        result = await handle.result()

    assert result.status == "completed"
    assert "README.md" in tool_messages(llm, 1)[-1]
    audit = await audit_of(database_url, result.run_id)
    decided = [a["detail"] for a in audit if a["action"] == "hook.tool_before"]
    assert [(d["hook"], d["action"]) for d in decided] == [
        ("asker/listings", "ask"),
        ("example/no_env_files", "allow"),
    ]


async def test_a_hook_s_refusal_is_audited_as_a_rule_s_refusal_is(
    installed: Path,
    temporal_client: Client,
    store: Store,
    workspace: Path,
    database_url: str,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    """A call a hook refuses, or that failing hooks refuse, leaves the entry a call a
    permission rule denies leaves: `tool.denied_by_policy` on the call, same shape."""
    (workspace / ".env").write_text("A=1\n")
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        call("read_file", path="secret/plan.md"),  # a rule denies it
                        call("read_file", path=".env"),  # the example's hook denies it
                    ]
                ),
                # The fragile hook fails (on its own step: it fails the step's judging).
                Turn(tool_calls=[call("search_code", pattern="x")]),
                # A tool.after hook fails: the output is withheld.
                Turn(tool_calls=[call("read_file", path="README.md")]),
                Turn(content="Done."),
            ]
        )
    )
    settings = settings_for(llm, workspace)
    deny = PermissionRule(permission="read_file", pattern="secret/*", action="deny")
    withholder = installed / "more"
    withholder.mkdir()
    modules = install_module(
        withholder,
        "withholder",
        "withholder_hook",
        WITHHOLDER,
        {"withholder": "withholder_hook:plugin"},
    )
    with on_path(withholder, modules):
        async with in_process_worker(temporal_client, store, settings):
            spec = agent("review", deny)
            handle = await start_run(temporal_client, settings, workspace, spec=spec)
            result = await handle.result()
    assert result.status == "completed"
    assert "the tool.after hooks that must see its output failed" in tool_messages(llm, 3)[-1]

    async with await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row) as conn:
        cur = await conn.execute(
            "SELECT actor, category, action, severity, subject, detail FROM audit_log"
            " WHERE subject LIKE %s ORDER BY id",
            (f"{result.run_id}/%",),
        )
        audit = list(await cur.fetchall())
    refusals = [a for a in audit if a["action"] == "tool.denied_by_policy"]
    run = result.run_id
    assert sorted((a["detail"]["tool"], a["detail"]["rule"]) for a in refusals) == [
        ("read_file", "hook example/no_env_files"),
        ("read_file", "read_file secret/* deny"),
        ("search_code", "tool.before hooks failed"),
    ]
    # Each on its call (run/step/ord), as a rule's is.
    steps = sorted(a["subject"].removeprefix(f"{run}/").split("/")[0] for a in refusals)
    assert steps == ["1", "1", "2"] and len({a["subject"] for a in refusals}) == 3
    shapes = {
        (a["actor"], a["category"], a["severity"], tuple(sorted(a["detail"]))) for a in refusals
    }
    assert shapes == {("policy", "approval", "warning", ("arguments", "rule", "tool"))}
    assert refusals[1]["detail"]["arguments"] == '{"path":".env"}'
    # The hook's own decision stays on record, a warning like the refusal it caused.
    [hook_deny] = [
        a for a in audit if a["action"] == "hook.tool_before" and a["detail"]["action"] == "deny"
    ]
    # Which hook failed and why: once, on its last attempt, a warning too.
    [failed] = [a for a in audit if a["action"] == "hook.tool_before_failed"]
    [search] = [a for a in refusals if a["detail"]["tool"] == "search_code"]
    assert (failed["subject"], failed["severity"], failed["actor"]) == (
        f"{search['subject']}/fragile/policy_service",
        "warning",
        "policy",
    )
    assert failed["detail"] == {
        "hook": "fragile/policy_service",
        "tool": "search_code",
        "error": "ConnectionError: the policy service is down",
    }
    [withheld] = [a for a in audit if a["action"] == "hook.tool_after_failed"]
    assert (withheld["severity"], withheld["detail"]) == (
        "warning",
        {"hook": "withholder/boom", "tool": "read_file", "error": "RuntimeError: no scanner"},
    )
    assert withheld["subject"].startswith(f"{run}/3/")
    [env] = [a for a in refusals if a["detail"]["rule"] == "hook example/no_env_files"]
    assert (hook_deny["subject"], hook_deny["severity"]) == (
        f"{env['subject']}/example/no_env_files",
        "warning",
    )
