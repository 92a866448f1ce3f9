"""Every surface starts a run the same way, and refuses the same way.

One test per surface (REST, a session message, A2A, MCP, a schedule trigger, the
LangGraph-compatible API, AG-UI) starts a run through its real client and checks that
the same records appear: the run row, its stored texts (the conversation's system
prompt and input, and the claim-checked texts), the `run_started` event and the
`run.started` audit entry. Then the drift that was found: an A2A decision (or a
LangGraph resume) refused for a wrong hash or a wrong approver is audited exactly as
the REST one, and a cross-tenant `contextId` is audited as a REST session id is.
If a surface ever grows its own path again, one of these fails.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from langgraph_sdk.errors import PermissionDeniedError, UnprocessableEntityError
from langgraph_sdk.schema import Command
from temporalio.client import Client as TemporalClient

from keel.activities.store.audit import AuditLog, AuditRecord
from keel.activities.store.run_store import Store
from keel.activities.store.run_texts import texts_key
from keel.api.core.tenant_ids import scoped
from keel.api.identity.auth import dev_token
from keel.worker.agent_catalog import AgentCatalog
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, Turn
from tests.conftest import JWT_SECRET, in_process_worker, token_for
from tests.integration.keel_http import (
    ALICE,
    BOB,
    MALLORY,
    LaunchKeel,
    MakeSettings,
    StartLLM,
    base_url,
    eventually,
    finished,
    keel_api,
    pending,
)
from tests.integration.test_approvals import write
from tests.integration.test_langgraph import langgraph
from tests.integration.test_mcp import call, mcp_client, refused

DONE = Script(turns=[Turn(content="done")])
WRITES_N = Script(turns=[Turn(tool_calls=[write("n.txt", "x")]), Turn(content="Wrote it.")])


async def a2a(
    http: httpx.AsyncClient, params: dict[str, Any], headers: dict[str, str] = ALICE
) -> dict[str, Any]:
    """A v1.0 SendMessage over raw JSON-RPC; the body of the answer."""
    response = await http.post(
        "/a2a",
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params},
        headers={**headers, "A2A-Version": "1.0"},
    )
    body: dict[str, Any] = response.json()
    return body


def text_message(text: str, **fields: Any) -> dict[str, Any]:
    return {
        "message": {
            "messageId": f"m-{uuid.uuid4().hex[:8]}",
            "role": "ROLE_USER",
            "parts": [{"text": text}],
            **fields,
        },
        "configuration": {"returnImmediately": True},
    }


async def assert_started_records(
    store: Store, database_url: str, run_id: str, *, trigger: str, prompt: str
) -> None:
    """The records every started run has, whichever surface started it."""
    record = await store.get_run(run_id)
    assert record is not None, f"no run row for {run_id}"
    assert (record.tenant_id, record.requester, record.trigger) == (
        "default",
        "user:alice",
        trigger,
    )
    assert record.agent == "review" and record.input == prompt
    system_prompt = AgentCatalog.load().get("review").system_prompt  # type: ignore[union-attr]
    messages = await store.conversation(run_id, None)
    assert [(m.role, m.content) for m in messages[:2]] == [
        ("system", system_prompt),
        ("user", prompt),
    ]
    assert await store.run_texts("default", texts_key(system_prompt, prompt)) == (
        system_prompt,
        prompt,
    )
    [started] = [e for e in await store.list_events(run_id) if e.type == "run_started"]
    assert started.seq == 1 and started.data["trigger"] == trigger
    assert started.data["input"] == prompt
    audit = [
        e
        for e in await AuditLog(store.pool).entries("default", limit=10_000)
        if e.subject == run_id and e.action == "run.started"
    ]
    assert len(audit) == 1, audit
    assert audit[0].actor == "alice" and audit[0].detail["trigger"] == trigger
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute("SELECT count(*) FROM runs WHERE id = %s", (run_id,))
        row = await cur.fetchone()
    assert row is not None and row[0] == 1


async def test_rest_starts_a_run_with_every_record(
    store: Store, database_url: str, workspace: Path, keel_app: LaunchKeel
) -> None:
    async with keel_app(DONE, http_timeout=60) as http:
        body = {"agent": "review", "input": "Parity via REST.", "workspace": str(workspace)}
        created = await http.post("/v1/runs", json=body)
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        assert (await finished(http, run_id))["status"] == "completed"
    await assert_started_records(
        store, database_url, run_id, trigger="api", prompt="Parity via REST."
    )


async def test_a_session_message_starts_a_run_with_every_record(
    store: Store, database_url: str, workspace: Path, keel_app: LaunchKeel
) -> None:
    async with keel_app(DONE, http_timeout=60) as http:
        session = await http.post(
            "/v1/sessions", json={"agent": "review", "workspace": str(workspace)}
        )
        assert session.status_code == 201, session.text
        sent = await http.post(
            f"/v1/sessions/{session.json()['id']}/messages", json={"input": "Parity via a session."}
        )
        assert sent.status_code == 202, sent.text
        run_id = sent.json()["run"]["id"]
        assert (await finished(http, run_id))["status"] == "completed"
    await assert_started_records(
        store, database_url, run_id, trigger="api", prompt="Parity via a session."
    )


async def test_a2a_starts_a_run_with_every_record(
    store: Store, database_url: str, workspace: Path, keel_app: LaunchKeel
) -> None:
    async with keel_app(DONE, http_timeout=60, a2a_default_agent="review") as http:
        answer = await a2a(
            http, text_message("Parity via A2A.", metadata={"workspace": str(workspace)})
        )
        assert "result" in answer, answer
        run_id = answer["result"]["task"]["id"]
        assert (await finished(http, run_id))["status"] == "completed"
    await assert_started_records(
        store, database_url, run_id, trigger="a2a", prompt="Parity via A2A."
    )


async def test_mcp_starts_a_run_with_every_record(
    store: Store, database_url: str, workspace: Path, keel_app: LaunchKeel
) -> None:
    async with (
        keel_app(DONE, http_timeout=60) as http,
        mcp_client(base_url(http), token_for("default", "alice")) as client,
    ):
        started = await call(
            client,
            "start_run",
            agent="review",
            input="Parity via MCP.",
            workspace=str(workspace),
        )
        run_id = started["run_id"]
        assert (await finished(http, run_id))["status"] == "completed"
    await assert_started_records(
        store, database_url, run_id, trigger="api", prompt="Parity via MCP."
    )


async def test_a_schedule_trigger_starts_a_run_with_every_record(
    store: Store, database_url: str, workspace: Path, keel_app: LaunchKeel
) -> None:
    async with keel_app(DONE, http_timeout=60) as http:
        created = await http.post(
            "/v1/schedules",
            json={
                "agent": "review",
                "input": "Parity via a schedule.",
                "workspace": str(workspace),
                "cron_expressions": ["0 3 1 1 *"],
            },
        )
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        try:
            triggered = await http.post(f"/v1/schedules/{sid}/trigger")
            assert triggered.status_code == 202, triggered.text
            run_id = triggered.json()["run_id"]
            assert run_id is not None
            await eventually(lambda: store.get_run(run_id), f"the row of run {run_id}")
            assert (await finished(http, run_id))["status"] == "completed"
        finally:
            await http.delete(f"/v1/schedules/{sid}")
    await assert_started_records(
        store, database_url, run_id, trigger="schedule", prompt="Parity via a schedule."
    )


# -- refusals: audited the same through A2A as through REST -------------------------


def refusals(entries: list[AuditRecord], run_id: str) -> list[tuple[object, ...]]:
    """The refused decisions of a run, as the audit log keeps them (who, what, why)."""
    return [
        (e.actor, e.category, e.action, e.severity, e.subject, e.detail)
        for e in entries
        if e.action == "decision.refused" and (e.subject or "").startswith(f"{run_id}/")
    ]


async def test_a2a_decisions_are_refused_and_audited_as_rest_ones(
    store: Store, workspace: Path, keel_app: LaunchKeel
) -> None:
    audit = AuditLog(store.pool)
    async with keel_app(WRITES_N, http_timeout=60) as http:
        created = await http.post(
            "/v1/runs",
            json={"agent": "build", "input": "Write n.txt.", "workspace": str(workspace)},
        )
        run_id = created.json()["id"]
        [ia] = await pending(http, run_id)
        url = f"/v1/runs/{run_id}/interactions/{ia['id']}"
        wrong_hash = {"decision": "approve", "payload_hash": "0" * 64}

        # Through REST: a wrong hash (alice) and a wrong approver (bob).
        before = await audit.entries("default", limit=10_000)
        assert (await http.post(url, json=wrong_hash)).status_code == 422
        assert (await http.post(url, json=wrong_hash, headers=BOB)).status_code == 403
        rest = refusals((await audit.entries("default", limit=10_000))[len(before) :], run_id)

        # Through A2A: the same two decisions, as data parts naming the task.
        before = await audit.entries("default", limit=10_000)
        for headers in (ALICE, BOB):
            answer = await a2a(
                http,
                {
                    "message": {
                        "messageId": f"m-{uuid.uuid4().hex[:8]}",
                        "role": "ROLE_USER",
                        "taskId": run_id,
                        "parts": [{"data": {**wrong_hash, "interaction_id": ia["id"]}}],
                    }
                },
                headers=headers,
            )
            assert answer["error"]["code"] == -32602, answer
        through_a2a = refusals(
            (await audit.entries("default", limit=10_000))[len(before) :], run_id
        )

        assert len(rest) == 2 and through_a2a == rest
        assert rest[0][0] == "alice" and "does not match" in str(rest[0][5])
        assert rest[1][0] == "bob" and "may not decide" in str(rest[1][5])
        # The refusals took nothing: the interaction still waits, and approving works.
        approved = await http.post(
            url, json={"decision": "approve", "payload_hash": ia["payload_hash"]}
        )
        assert approved.status_code == 200, approved.text
        assert (await finished(http, run_id))["status"] == "completed"
    assert (workspace / "n.txt").read_text() == "x"


async def test_a_context_id_another_tenant_holds_is_a_context_of_ones_own_on_a2a_and_rest(
    store: Store, workspace: Path, keel_app: LaunchKeel
) -> None:
    audit = AuditLog(store.pool)
    context_id = f"ctx-parity-{uuid.uuid4().hex[:8]}"
    script = Script(turns=[Turn(content="done")] * 3)
    async with keel_app(script, http_timeout=60, a2a_default_agent="review") as http:
        mine = await a2a(http, text_message("Mine.", contextId=context_id))
        assert "result" in mine, mine
        assert (await finished(http, mine["result"]["task"]["id"]))["status"] == "completed"

        # Ids are per tenant (issue 21, #18): A2A and REST alike give mallory her own.
        theirs = await a2a(http, text_message("Theirs.", contextId=context_id), headers=MALLORY)
        assert theirs["result"]["task"]["contextId"] == context_id, theirs
        rest = await http.post(
            "/v1/runs",
            headers=MALLORY,
            json={
                "agent": "review",
                "input": "Theirs again.",
                "workspace": str(workspace),
                "session_id": context_id,
                "on_busy": "enqueue",
            },
        )
        assert rest.status_code == 201, rest.text
        assert rest.json()["session_id"] == context_id
    denied = [
        e for e in await audit.entries("other-tenant", limit=10_000) if e.subject == context_id
    ]
    assert denied == []
    # Nothing of mallory's is in alice's session, and her two runs share her own.
    assert [r.input for r in await store.list_runs(tenant_id="default", session_id=context_id)] == [
        "Mine."
    ]
    kept = scoped("other-tenant", context_id)
    theirs_runs = await store.list_runs(tenant_id="other-tenant", session_id=kept)
    assert sorted(r.input for r in theirs_runs) == ["Theirs again.", "Theirs."]


# -- the LangGraph-compatible API and AG-UI: the same run, the same refusals ----------


async def test_langgraph_starts_a_run_with_every_record(
    store: Store, database_url: str, keel_app: LaunchKeel
) -> None:
    async with keel_app(DONE, http_timeout=60) as http:
        lg = langgraph(http, "alice")
        thread = await lg.threads.create(metadata={"graph_id": "review"})
        ask = {"messages": [{"role": "user", "content": "Parity via LangGraph."}]}
        run = await lg.runs.create(thread["thread_id"], "review", input=ask)
        assert (await finished(http, run["run_id"]))["status"] == "completed"
    await assert_started_records(
        store, database_url, run["run_id"], trigger="api", prompt="Parity via LangGraph."
    )


async def test_agui_starts_a_run_with_every_record(
    store: Store, database_url: str, keel_app: LaunchKeel
) -> None:
    run_id = f"run-agui-{uuid.uuid4().hex[:8]}"
    async with keel_app(DONE, http_timeout=60) as http:
        body = {
            "threadId": f"thread-{uuid.uuid4().hex[:8]}",
            "runId": run_id,
            "messages": [{"id": "m1", "role": "user", "content": "Parity via AG-UI."}],
        }
        async with http.stream("POST", "/ag-ui/review", json=body) as response:
            assert response.status_code == 200
            lines = [line async for line in response.aiter_lines()]
        assert '"RUN_FINISHED"' in lines[-2], lines[-2:]
        assert (await finished(http, run_id))["status"] == "completed"
    await assert_started_records(
        store, database_url, run_id, trigger="api", prompt="Parity via AG-UI."
    )


async def test_langgraph_resumes_are_refused_and_audited_as_rest_decisions(
    store: Store, workspace: Path, keel_app: LaunchKeel
) -> None:
    audit = AuditLog(store.pool)
    async with keel_app(WRITES_N, http_timeout=60) as http:
        alice, bob = langgraph(http, "alice"), langgraph(http, "bob")
        thread_id = (await alice.threads.create(metadata={"graph_id": "build"}))["thread_id"]
        ask = {"messages": [{"role": "user", "content": "Write n.txt."}]}
        waiting = await alice.runs.wait(thread_id, "build", input=ask)
        [interrupt] = waiting["__interrupt__"]
        run_id, ia_id = interrupt["value"]["run_id"], interrupt["id"]
        wrong_hash = {"decision": "approve", "payload_hash": "0" * 64}

        url = f"/v1/runs/{run_id}/interactions/{ia_id}"
        before = await audit.entries("default", limit=10_000)
        assert (await http.post(url, json=wrong_hash)).status_code == 422
        assert (await http.post(url, json=wrong_hash, headers=BOB)).status_code == 403
        rest = refusals((await audit.entries("default", limit=10_000))[len(before) :], run_id)

        before = await audit.entries("default", limit=10_000)
        with pytest.raises(UnprocessableEntityError, match="does not match"):
            await alice.runs.create(thread_id, "build", command=Command(resume=wrong_hash))
        with pytest.raises(PermissionDeniedError):
            await bob.runs.create(thread_id, "build", command=Command(resume=wrong_hash))
        through_langgraph = refusals(
            (await audit.entries("default", limit=10_000))[len(before) :], run_id
        )
        assert len(rest) == 2 and through_langgraph == rest
        # The refusals took nothing: the interrupt still waits, and resuming approves it.
        done = await alice.runs.wait(thread_id, "build", command=Command(resume=True))
        assert done["messages"][-1]["content"] == "Wrote it."
    assert (workspace / "n.txt").read_text() == "x"


# -- an agent's `roles:`: the same refusal, audited alike, on every surface ------------

# `build` as an operator limits it: only developers may use it, on any surface.
GUARDED_BUILD = """---
name: build
description: Makes changes to a workspace, with approval.
tools: [list_files, read_file, write_file, ask_user]
roles: [developer]
---
You make changes to the workspace, with approval.
"""
# The same agent after its file changed: now only release managers may use it.
REGUARDED_BUILD = GUARDED_BUILD.replace("roles: [developer]", "roles: [release]")
DEV = {"authorization": f"Bearer {dev_token(JWT_SECRET, 'default', 'dev', roles=('developer',))}"}
ROLE_REFUSAL = "Your roles may not use the agent 'build'"


async def build_runs(http: httpx.AsyncClient) -> set[str]:
    """The ids of the tenant's latest runs of build."""
    page = (await http.get("/v1/runs", params={"limit": 200})).json()
    return {r["id"] for r in page["runs"] if r["agent"] == "build"}


def agent_refusals(entries: list[AuditRecord]) -> list[tuple[object, ...]]:
    """The role refusals the audit log keeps: who, which agent, through which door."""
    return [
        (e.actor, e.category, e.severity, e.detail["agent"], e.detail["via"])
        for e in entries
        if e.action == "agent.refused"
    ]


async def test_an_agent_the_callers_roles_exclude_is_refused_and_audited_alike_everywhere(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "build.md").write_text(GUARDED_BUILD)
    llm = scripted(Script(turns=[Turn(content="done")]))
    settings = settings_for(llm, workspace, api_port=free_port(), agents_dir=agents)
    audit = AuditLog(store.pool)
    before = await audit.entries("default", limit=10_000)
    ws = str(workspace)
    ask = {"messages": [{"role": "user", "content": "Build it."}]}
    async with (
        keel_api(temporal_client, store, settings, headers=ALICE, http_timeout=60) as http,
        mcp_client(str(http.base_url).rstrip("/"), token_for("default", "alice")) as mcp,
    ):
        # Listings offer alice only what she may use; a developer sees build.
        names = [a["name"] for a in (await http.get("/v1/agents")).json()]
        assert "build" not in names and names[-1] == "auto" and "review" in names
        dev_names = [a["name"] for a in (await http.get("/v1/agents", headers=DEV)).json()]
        assert "build" in dev_names
        listed = await call(mcp, "list_agents")
        assert "build" not in [a["name"] for a in listed["agents"]]
        assert "build" not in [p.name for p in (await mcp.list_prompts()).prompts]
        assert "keel://agents/build" not in [
            str(r.uri) for r in (await mcp.list_resources()).resources
        ]
        lg = langgraph(http, "alice")
        assert "build" not in [a["graph_id"] for a in await lg.assistants.search()]
        # Cards, read with her token and without any: build is not offered.
        build_card = "/a2a/build/.well-known/agent-card.json"
        async with httpx.AsyncClient(base_url=http.base_url) as anonymous:
            for reader in (http, anonymous):
                card = (await reader.get("/.well-known/agent-card.json")).json()
                assert "build" not in [s["id"] for s in card["skills"]]
                assert "review" in [s["id"] for s in card["skills"]]
                assert (await reader.get(build_card)).status_code == 404
        assert (
            await http.get("/a2a/build/.well-known/agent-card.json", headers=DEV)
        ).status_code == 200
        dev_card = (await http.get("/.well-known/agent-card.json", headers=DEV)).json()
        assert "build" in [s["id"] for s in dev_card["skills"]]

        # Every door that starts a run (or a session, or a schedule) on build refuses alike.
        earlier = await build_runs(http)
        rest = await http.post("/v1/runs", json={"agent": "build", "input": "x", "workspace": ws})
        assert rest.status_code == 403 and ROLE_REFUSAL in rest.json()["detail"], rest.text
        session = await http.post("/v1/sessions", json={"agent": "build", "workspace": ws})
        assert session.status_code == 403 and ROLE_REFUSAL in session.json()["detail"]
        # A developer's session on build, in her tenant: her message there is refused too.
        theirs = await http.post(
            "/v1/sessions", json={"agent": "build", "workspace": ws}, headers=DEV
        )
        assert theirs.status_code == 201, theirs.text
        message = await http.post(
            f"/v1/sessions/{theirs.json()['id']}/messages", json={"input": "x"}
        )
        assert message.status_code == 403 and ROLE_REFUSAL in message.json()["detail"]
        schedule = await http.post(
            "/v1/schedules",
            json={
                "agent": "build",
                "input": "x",
                "workspace": ws,
                "cron_expressions": ["0 3 1 1 *"],
            },
        )
        assert schedule.status_code == 403 and ROLE_REFUSAL in schedule.json()["detail"]
        sent = await http.post(
            "/a2a/build",
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": text_message("x")},
            headers={"A2A-Version": "1.0"},
        )
        assert ROLE_REFUSAL in sent.json()["error"]["message"], sent.text
        assert ROLE_REFUSAL in await refused(
            mcp, "start_run", agent="build", input="x", workspace=ws
        )
        with pytest.raises(PermissionDeniedError):
            await lg.runs.create(None, "build", input=ask)
        agui = await http.post(
            "/ag-ui/build",
            json={
                "threadId": f"thread-{uuid.uuid4().hex[:8]}",
                "runId": f"run-{uuid.uuid4().hex[:8]}",
                "messages": [{"id": "m1", "role": "user", "content": "x"}],
            },
        )
        assert agui.status_code == 403 and ROLE_REFUSAL in agui.json()["detail"], agui.text
        # Nothing started: no run of build since the refusals began.
        assert await build_runs(http) == earlier

        # A developer may: a run starts, and a schedule is created (checked again as it fires).
        mine = await http.post(
            "/v1/runs", json={"agent": "build", "input": "Say done.", "workspace": ws}, headers=DEV
        )
        assert mine.status_code == 201, mine.text
        assert (await finished(http, mine.json()["id"]))["status"] == "completed"

    entries = (await audit.entries("default", limit=10_000))[len(before) :]
    # One entry per refusal, the same shape whichever door: only `via` tells them apart
    # (AG-UI's first request on a thread creates its session, so its refusal is that one).
    doors = ["api", "session", "api", "schedule", "a2a", "api", "api", "session"]
    assert agent_refusals(entries) == [("alice", "auth", "warning", "build", v) for v in doors]


async def test_a_schedule_fires_with_its_creators_roles_against_the_agent_file_of_now(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    then, now = tmp_path / "then", tmp_path / "now"
    for folder, text in ((then, GUARDED_BUILD), (now, REGUARDED_BUILD)):
        folder.mkdir()
        (folder / "build.md").write_text(text)
    llm = scripted(Script(turns=[Turn(content="done")]))
    api_settings = settings_for(llm, workspace, api_port=free_port(), agents_dir=then)
    # The workers have the changed file: the creator's role no longer lets them use it.
    worker_settings = api_settings.model_copy(update={"agents_dir": now})
    async with (
        in_process_worker(temporal_client, store, worker_settings),
        keel_api(temporal_client, store, api_settings, headers=DEV, worker=False) as http,
    ):
        created = await http.post(
            "/v1/schedules",
            json={
                "agent": "build",
                "input": "Say done.",
                "workspace": str(workspace),
                "cron_expressions": ["0 3 1 1 *"],
            },
        )
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        try:
            triggered = await http.post(f"/v1/schedules/{sid}/trigger")
            assert triggered.status_code == 202, triggered.text
            run_id = triggered.json()["run_id"]
            for _ in range(400):
                if await store.get_run(run_id) is not None:
                    break
                await asyncio.sleep(0.05)
            run = await finished(http, run_id)
        finally:
            await http.delete(f"/v1/schedules/{sid}")
    assert run["status"] == "failed" and run["trigger"] == "schedule"
    assert "creator's roles may not use the agent 'build'" in run["error"]
    assert run["steps"] == 0 and llm.total_requests == 0  # no model call was made
    [entry] = [
        e
        for e in await AuditLog(store.pool).entries("default", limit=10_000)
        if e.action == "agent.refused" and e.subject == run_id
    ]
    assert (entry.actor, entry.detail["via"], entry.detail["agent"]) == ("dev", "schedule", "build")
