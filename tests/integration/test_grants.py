"""Grants that last: `approve_always` with a scope, listed and revoked, never too wide."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk.schema import Command
from temporalio.client import Client

from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.conftest import auth_headers, token_for
from tests.integration.keel_http import (
    MALLORY,
    LaunchKeel,
    StartLLM,
    base_url,
    eventually,
    run_reaches,
)
from tests.integration.test_cli import clean_env, keel
from tests.integration.test_langgraph import langgraph
from tests.integration.test_mcp import FINISHED, call, mcp_client, refused, until_run
from tests.integration.test_replay import HISTORIES, replayer
from tests.integration.test_sessions import new_session, post


def write(path: str) -> ScriptedToolCall:
    return ScriptedToolCall(name="write_file", arguments={"path": path, "content": path})


async def pending(http: httpx.AsyncClient, run_id: str) -> dict[str, Any] | None:
    items = (await http.get(f"/v1/runs/{run_id}/interactions")).json()
    waiting = [i for i in items if i["status"] == "pending"]
    return waiting[0] if waiting else None


async def decide(
    http: httpx.AsyncClient,
    run_id: str,
    ia: dict[str, Any],
    decision: str = "approve",
    grant: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    body: dict[str, Any] = {"decision": decision, "payload_hash": ia["payload_hash"]}
    if grant is not None:
        body["grant"] = grant
    return await http.post(
        f"/v1/runs/{run_id}/interactions/{ia['id']}", json=body, headers=headers or {}
    )


ADMIN = auth_headers("default", "root", "keel:admin")


async def grants_of(http: httpx.AsyncClient, run_id: str, **params: str) -> list[dict[str, Any]]:
    """The grants that approvals of `run_id` made (the database is the test process's)."""
    listed = (await http.get("/v1/grants", params=params)).json()["grants"]
    return [g for g in listed if g["run_id"] == run_id]


async def audit_actions(
    http: httpx.AsyncClient, subject: str = "", tenant: str = "default"
) -> list[str]:
    """Actions of the tenant's audit entries about `subject`, every page of them."""
    actions: list[str] = []
    after = 0
    while True:
        params: dict[str, str | int] = {"tenant": tenant, "after_id": after, "limit": 1000}
        rows = await http.get("/v1/admin/audit", headers=ADMIN, params=params)
        assert rows.status_code == 200, rows.text
        page = rows.json()
        actions += [e["action"] for e in page if subject in (e["subject"] or "")]
        if len(page) < 1000:
            return actions
        after = page[-1]["id"]


async def test_a_session_glob_grant_covers_matching_calls_until_it_is_revoked(
    workspace: Path, scripted: StartLLM, keel_app: LaunchKeel, temporal_client: Client
) -> None:
    # One run: notes/a asks and is granted `notes/*` for the session; notes/b then runs
    # without asking; other.txt (not covered) asks; the grant is revoked while it waits;
    # notes/c asks again.
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[write("notes/a.txt")]),
                Turn(tool_calls=[write("notes/b.txt")]),
                Turn(tool_calls=[write("other.txt")]),
                Turn(tool_calls=[write("notes/c.txt")]),
                Turn(content="done"),
            ]
        )
    )
    async with keel_app(llm) as http:
        session = await new_session(http, workspace, agent="build")
        run_id = (await post(http, session, "write notes")).json()["run"]["id"]
        first = await eventually(lambda: pending(http, run_id), "the first approval")
        assert first["subject"] == "notes/a.txt"
        decided = await decide(
            http, run_id, first, "approve_always", {"kind": "session", "pattern": "notes/*"}
        )
        assert decided.status_code == 200, decided.text
        grant = decided.json()["grant"]
        assert grant["kind"] == "session" and grant["pattern"] == "notes/*"
        assert grant["granted_by"] == "user:alice" and grant["permission"] == "write_file"

        second = await eventually(lambda: pending(http, run_id), "the uncovered call's approval")
        assert second["subject"] == "other.txt"  # notes/b.txt ran without asking
        assert (workspace / "notes" / "b.txt").read_text() == "notes/b.txt"
        assert [g["id"] for g in await grants_of(http, run_id)] == [grant["id"]]

        revoked = await http.delete(f"/v1/grants/{grant['id']}")
        assert revoked.status_code == 200, revoked.text
        assert revoked.json()["status"] == "revoked"
        assert revoked.json()["revoked_by"] == "user:alice"
        again = await http.delete(f"/v1/grants/{grant['id']}")  # idempotent
        assert (
            again.status_code == 200 and again.json()["revoked_at"] == revoked.json()["revoked_at"]
        )
        assert (await decide(http, run_id, second)).status_code == 200

        third = await eventually(lambda: pending(http, run_id), "the revoked grant's ask")
        assert third["subject"] == "notes/c.txt"
        assert (await decide(http, run_id, third, "reject")).status_code == 200
        await run_reaches(http, run_id, "completed")
        assert await grants_of(http, run_id) == []
        every = await grants_of(http, run_id, all="true")
        assert [g["status"] for g in every] == ["revoked"]
        actions = await audit_actions(http, f"grant/{grant['id']}")
        assert actions.count("grant.created") == 1 and actions.count("grant.revoked") == 1

    history = await temporal_client.get_workflow_handle(run_id).fetch_history()
    assert (await replayer().replay_workflow(history)).replay_failure is None
    if os.environ.get("KEEL_RECORD_HISTORY"):
        # KEEL_RECORD_HISTORY=1: keep this run's history (a grant made, then revoked by
        # signal) for test_replay.
        target = HISTORIES / "agent_run_session_grant.json"
        target.write_text(json.dumps(history.to_json_dict(), indent=1))


async def test_the_next_run_of_the_session_takes_the_grant(
    workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    # Turns are chosen by the number of assistant messages a request carries: run 1
    # plays turns 0-1, run 2 (with run 1's history) turns 1-2.
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[write("notes/a.txt")]),
                Turn(tool_calls=[write("notes/d.txt")]),
                Turn(content="done"),
            ]
        )
    )
    async with keel_app(llm) as http:
        session = await new_session(http, workspace, agent="build")
        first = (await post(http, session, "one")).json()["run"]["id"]
        ia = await eventually(lambda: pending(http, first), "the approval")
        granted = await decide(
            http, first, ia, "approve_always", {"kind": "session", "pattern": "notes/*.txt"}
        )
        assert granted.status_code == 200, granted.text
        await run_reaches(http, first, "completed")
        second = (await post(http, session, "two")).json()["run"]["id"]
        done = await run_reaches(http, second, "completed")
        assert done["report"] == "done"
        assert (await http.get(f"/v1/runs/{second}/interactions")).json() == []
        assert (workspace / "notes" / "d.txt").exists()


async def test_a_grant_wider_than_the_approver_may_give_is_refused(
    workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    call = ScriptedToolCall(name="bash", arguments={"command": ["ls", "-la"]})
    llm = scripted(Script(turns=[Turn(tool_calls=[call]), Turn(content="done")]))
    tenant = f"grants-{uuid.uuid4().hex[:8]}"  # its `agent` grant covers alice's build runs

    async def start() -> str:
        body = {"agent": "build", "input": "list", "workspace": str(workspace)}
        created = await http.post("/v1/runs", json=body)
        assert created.status_code == 201, created.text
        return str(created.json()["id"])

    async with keel_app(llm, headers=auth_headers(tenant, "alice")) as http:
        run_id = await start()
        ia = await eventually(lambda: pending(http, run_id), "the approval")

        # `*` would also cover `rm -rf*`, which the build agent denies.
        wide = await decide(http, run_id, ia, "approve_always", {"kind": "run", "pattern": "*"})
        assert wide.status_code == 422, wide.text
        assert "rm -rf*" in wide.json()["detail"]
        # A pattern that does not cover the call it answers.
        off = await decide(http, run_id, ia, "approve_always", {"kind": "run", "pattern": "git *"})
        assert off.status_code == 422 and "does not cover" in off.json()["detail"]
        # Outside a session there is no session to grant for.
        no_session = await decide(http, run_id, ia, "approve_always", {"kind": "session"})
        assert no_session.status_code == 422 and "not in a session" in no_session.json()["detail"]
        past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
        stale = await decide(http, run_id, ia, "approve_always", {"kind": "run", "until": past})
        assert stale.status_code == 422 and "not in the future" in stale.text
        # Someone who may not approve the call may not grant it either.
        bob = auth_headers(tenant, "bob")
        stranger = await decide(
            http, run_id, ia, "approve_always", {"kind": "run", "pattern": "ls *"}, bob
        )
        assert stranger.status_code == 403 and "may not decide" in stranger.text
        assert await grants_of(http, run_id) == []
        assert (await pending(http, run_id)) is not None  # nothing took

        until = (datetime.now(UTC) + timedelta(days=1)).isoformat()
        ok = await decide(
            http, run_id, ia, "approve_always", {"kind": "agent", "pattern": "ls *", "until": until}
        )
        assert ok.status_code == 200, ok.text
        assert ok.json()["grant"]["kind"] == "agent" and ok.json()["grant"]["until"]
        await run_reaches(http, run_id, "completed")
        refusals = (await audit_actions(http, run_id, tenant)).count("decision.refused")
        assert refusals >= 5

        # The agent grant covers alice's next build run from its start; revoked, it does not.
        llm.reset()
        covered = await start()
        assert (await run_reaches(http, covered, "completed"))["report"] == "done"
        assert (await http.get(f"/v1/runs/{covered}/interactions")).json() == []
        revoked = await http.delete(f"/v1/grants/{ok.json()['grant']['id']}")
        assert revoked.status_code == 200, revoked.text
        llm.reset()
        after = await start()
        asks = await eventually(lambda: pending(http, after), "an approval again")
        assert asks["subject"] == "ls -la"
        await http.post(f"/v1/runs/{after}/cancel")


async def test_an_agent_grant_needs_the_user_or_an_admin(
    workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    call = ScriptedToolCall(name="bash", arguments={"command": ["ls"]})
    llm = scripted(Script(turns=[Turn(tool_calls=[call]), Turn(content="done")]))
    async with keel_app(llm) as http:
        created = await http.post(
            "/v1/runs",
            json={
                "agent": "build",
                "input": "list",
                "workspace": str(workspace),
                "approver": "user:carol",
            },
        )
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        ia = await eventually(lambda: pending(http, run_id), "the approval")
        carol = auth_headers("default", "carol")
        refused = await decide(
            http, run_id, ia, "approve_always", {"kind": "agent", "pattern": "ls*"}, carol
        )
        assert refused.status_code == 403, refused.text
        assert "user:alice" in refused.json()["detail"]
        ok = await decide(http, run_id, ia, "approve_always", {"kind": "run"}, carol)
        assert ok.status_code == 200, ok.text
        await run_reaches(http, run_id, "completed")


async def test_grants_are_the_tenants_own(
    workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    llm = scripted(Script(turns=[Turn(tool_calls=[write("a.txt")]), Turn(content="done")]))
    async with keel_app(llm) as http:
        created = await http.post(
            "/v1/runs", json={"agent": "build", "input": "w", "workspace": str(workspace)}
        )
        run_id = created.json()["id"]
        ia = await eventually(lambda: pending(http, run_id), "the approval")
        granted = await decide(http, run_id, ia, "approve_always", {"kind": "run"})
        assert granted.status_code == 200, granted.text
        grant_id = granted.json()["grant"]["id"]
        assert granted.json()["grant"]["pattern"] == "a.txt"
        retried = await decide(http, run_id, ia, "approve_always", {"kind": "run"})
        assert retried.status_code == 200, retried.text  # a retry took; no second grant
        assert [g["id"] for g in await grants_of(http, run_id)] == [grant_id]
        await run_reaches(http, run_id, "completed")

        theirs_listed = (await http.get("/v1/grants", headers=MALLORY)).json()["grants"]
        assert grant_id not in [g["id"] for g in theirs_listed]
        theirs = await http.get(f"/v1/grants/{grant_id}", headers=MALLORY)
        assert theirs.status_code == 404
        revoke = await http.delete(f"/v1/grants/{grant_id}", headers=MALLORY)
        assert revoke.status_code == 404 and grant_id in revoke.json()["detail"]
        mine = (await http.get(f"/v1/grants/{grant_id}")).json()
        assert mine["status"] == "active"
        # Someone else of the tenant who neither granted it nor is covered by it.
        bob = await http.delete(f"/v1/grants/{grant_id}", headers=auth_headers("default", "bob"))
        assert bob.status_code == 403
        actions = await audit_actions(http, f"grant/{grant_id}")
        assert "grant.revoke_refused" in actions
        theirs_audit = await audit_actions(http, grant_id, tenant="other-tenant")
        assert "grant.cross_tenant_denied" in theirs_audit


@pytest.mark.slow  # four `keel` processes, each a Python start on a shared machine
async def test_the_cli_grants_lists_and_revokes(
    workspace: Path, tmp_path: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    call = ScriptedToolCall(name="bash", arguments={"command": ["ls", "-la"]})
    llm = scripted(Script(turns=[Turn(tool_calls=[call]), Turn(content="done")]))
    tenant = f"cli-{uuid.uuid4().hex[:8]}"
    async with keel_app(llm, headers=auth_headers(tenant, "alice")) as http:
        env = clean_env(
            KEEL_API_URL=base_url(http),
            KEEL_DATA_DIR=str(tmp_path / "cli"),
            KEEL_TOKEN=token_for(tenant, "alice"),
        )
        created = await http.post(
            "/v1/runs", json={"agent": "build", "input": "list", "workspace": str(workspace)}
        )
        run_id = created.json()["id"]
        ia = await eventually(lambda: pending(http, run_id), "the approval")
        args = ["approve", run_id, ia["id"], "--always", "--scope", "run", "--pattern"]
        code, out = await keel(*args, "ls [ab]*", env=env)  # the glob covers nothing here
        assert code == 1 and "does not cover" in out, out
        code, out = await keel(*args, "ls *", env=env)
        assert code == 0 and "accepted" in out, out
        await run_reaches(http, run_id, "completed")
        [grant] = await grants_of(http, run_id)

        # Wide enough that a row is one line whatever the ids (a narrow one folds cells).
        code, listing = await keel("rules", "list", env={**env, "COLUMNS": "200"})
        rows = [line for line in listing.splitlines() if grant["id"] in line]
        assert len(rows) == 1, listing
        [row] = rows
        assert code == 0 and "bash" in row and "ls *" in row and f"run {run_id}" in row, listing
        code, out = await keel("rules", "revoke", grant["id"], env=env)
        assert code == 0 and f"{grant['id']}: revoked by user:alice" in out, out
        assert (await http.get(f"/v1/grants/{grant['id']}")).json()["status"] == "revoked"


async def test_an_mcp_client_grants_with_a_scope(workspace: Path, keel_app: LaunchKeel) -> None:
    script = Script(
        turns=[
            Turn(tool_calls=[write("notes/a.txt")]),
            Turn(tool_calls=[write("notes/b.txt")]),
            Turn(content="Wrote both."),
        ]
    )
    tenant = f"mcp-{uuid.uuid4().hex[:8]}"
    async with (
        keel_app(script) as http,
        mcp_client(base_url(http), token_for(tenant, "alice")) as alice,
    ):
        started = await call(
            alice, "start_run", agent="build", input="Write notes.", workspace=str(workspace)
        )
        run_id = started["run_id"]
        waiting = await until_run(alice, run_id, lambda d: bool(d["pending_interactions"]))
        [ia] = waiting["pending_interactions"]
        always = {
            "run_id": run_id,
            "interaction_id": ia["id"],
            "decision": "approve_always",
            "payload_hash": ia["payload_hash"],
        }
        wide = await refused(alice, "decide", **always, grant={"kind": "run", "pattern": "x/*"})
        assert "does not cover" in wide
        accepted = await call(
            alice, "decide", **always, grant={"kind": "run", "pattern": "notes/*"}
        )
        assert accepted["grant"]["pattern"] == "notes/*"
        done = await until_run(alice, run_id, lambda d: d["run"]["status"] in FINISHED)
        assert done["run"]["status"] == "completed" and done["pending_interactions"] == []
    assert (workspace / "notes" / "b.txt").exists()  # ran under the grant, unasked


async def test_a_langgraph_resume_grants_for_the_thread(
    workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[write("notes/a.txt")]),
                Turn(tool_calls=[write("notes/b.txt")]),
                Turn(content="Wrote both."),
            ]
        )
    )
    async with keel_app(llm) as http:
        lg = langgraph(http)
        thread_id = (await lg.threads.create(metadata={"graph_id": "build"}))["thread_id"]
        ask = {"messages": [{"role": "user", "content": "Write the notes."}]}
        parts = [
            p async for p in lg.runs.stream(thread_id, "build", input=ask, stream_mode="updates")
        ]
        run_id = parts[0].data["run_id"]
        [interrupt] = parts[-1].data["__interrupt__"]
        resume = {
            "decision": "approve_always",
            "payload_hash": interrupt["value"]["payload_hash"],
            "grant": {"kind": "session", "pattern": "notes/*"},
        }
        resumed = [
            p
            async for p in lg.runs.stream(
                thread_id, "build", command=Command(resume=resume), stream_mode="updates"
            )
        ]
        assert not any("__interrupt__" in (p.data or {}) for p in resumed)  # b ran unasked
        assert (await lg.runs.get(thread_id, run_id))["status"] == "success"
        [grant] = await grants_of(http, run_id)
        assert grant["kind"] == "session" and grant["session_id"] == thread_id
    assert (workspace / "notes" / "b.txt").exists()


async def test_a_grant_reaches_a_run_already_going(
    workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    # Both runs first ask a question and wait; run A's `agent` grant then reaches run B
    # (started before it existed) by signal, so B's command runs without asking.
    call = ScriptedToolCall(name="bash", arguments={"command": ["ls", "-la"]})
    question = ScriptedToolCall(name="ask_user", arguments={"question": "Go?"})
    llm = scripted(
        Script(turns=[Turn(tool_calls=[question]), Turn(tool_calls=[call]), Turn(content="done")])
    )
    tenant = f"grants-{uuid.uuid4().hex[:8]}"
    async with keel_app(llm, headers=auth_headers(tenant, "alice")) as http:
        body = {"agent": "build", "input": "list", "workspace": str(workspace)}
        first = (await http.post("/v1/runs", json=body)).json()["id"]
        asked_first = await eventually(lambda: pending(http, first), "A's question")
        second = (await http.post("/v1/runs", json=body)).json()["id"]
        asked_second = await eventually(lambda: pending(http, second), "B's question")

        answer = {"decision": "answer", "text": "yes"}
        url = f"/v1/runs/{first}/interactions/{asked_first['id']}"
        assert (await http.post(url, json=answer)).status_code == 200
        approval = await eventually(lambda: pending(http, first), "A's approval")
        assert approval["kind"] == "confirm" and approval["subject"] == "ls -la"
        granted = await decide(
            http, first, approval, "approve_always", {"kind": "agent", "pattern": "ls *"}
        )
        assert granted.status_code == 200, granted.text
        await run_reaches(http, first, "completed")

        url = f"/v1/runs/{second}/interactions/{asked_second['id']}"
        assert (await http.post(url, json=answer)).status_code == 200
        done = await run_reaches(http, second, "completed")
        assert done["report"] == "done"
        kinds = [i["kind"] for i in (await http.get(f"/v1/runs/{second}/interactions")).json()]
        assert kinds == ["ask_user"]  # the command asked nobody
