"""Approvals end to end: the build agent asks, people decide over HTTP, tools run once."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from temporalio.client import Client

from keel.activities.store.audit import AuditLog
from keel.activities.store.interaction_store import InteractionStore
from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from keel.workflows.interactions.models import DecisionOutcome, InteractionDecision
from tests.conftest import in_process_worker
from tests.integration.keel_http import (
    ALICE,
    BOB,
    MALLORY,
    LaunchKeel,
    MakeSettings,
    StartLLM,
    finished,
    pending,
)
from tests.integration.runs import agent, start_run
from tests.integration.test_durability import wait_until, worker_env


def write(path: str, content: str) -> ScriptedToolCall:
    return ScriptedToolCall(name="write_file", arguments={"path": path, "content": content})


async def start(http: httpx.AsyncClient, workspace: Path, **extra: Any) -> str:
    response = await http.post(
        "/v1/runs",
        headers=ALICE,
        json={"agent": "build", "input": "Make the change.", "workspace": str(workspace), **extra},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def decide(
    http: httpx.AsyncClient,
    run_id: str,
    ia: dict[str, Any],
    decision: str = "approve",
    headers: dict[str, str] = ALICE,
    payload_hash: str | None = None,
    text: str | None = None,
) -> httpx.Response:
    body: dict[str, Any] = {"decision": decision}
    if decision.startswith("approve"):
        body["payload_hash"] = payload_hash or ia["payload_hash"]
    if text is not None:
        body["text"] = text
    return await http.post(f"/v1/runs/{run_id}/interactions/{ia['id']}", headers=headers, json=body)


async def executions(database_url: str, run_id: str) -> int:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM tool_executions WHERE run_id = %s", (run_id,)
        )
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def test_decisions_are_checked_and_the_approved_payload_runs_once(
    store: Store,
    workspace: Path,
    database_url: str,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[write("notes/out.txt", "hello")]),
                Turn(content="Wrote the file."),
            ]
        )
    )
    async with keel_app(llm, headers={}) as http:
        run_id = await start(http, workspace)
        [ia] = await pending(http, run_id)
        assert ia["tool"] == "write_file" and ia["subject"] == "notes/out.txt"
        assert ia["arguments"] == {"path": "notes/out.txt", "content": "hello"}
        assert ia["approvers"] == ["user:alice"]

        wrong = await decide(http, run_id, ia, payload_hash="0" * 64)
        assert wrong.status_code == 422 and "does not match" in wrong.text
        assert (await decide(http, run_id, ia, headers=BOB)).status_code == 403
        assert (await decide(http, run_id, ia, headers=MALLORY)).status_code == 404
        malformed = await http.post(
            f"/v1/runs/{run_id}/interactions/{ia['id']}", headers=ALICE, json={"decision": "yes"}
        )
        assert malformed.status_code == 422
        assert not (workspace / "notes" / "out.txt").exists()

        accepted = await decide(http, run_id, ia)
        assert accepted.status_code == 200, accepted.text
        assert accepted.json()["interaction"]["status"] == "approved"
        # The same decision again is a retry and hears that it took; another one is refused.
        again = await decide(http, run_id, ia)
        assert again.status_code == 200, again.text
        assert again.json()["status"] == "accepted"
        assert again.json()["interaction"]["decided_by"] == "user:alice"
        other = await decide(http, run_id, ia, decision="reject")
        # The workflow says "resolved"; if the run has already finished, Postgres says how
        # far the interaction went.
        assert other.status_code == 409
        assert "already resolved" in other.text or "already executed" in other.text

        run = await finished(http, run_id)
        assert run["status"] == "completed" and run["report"] == "Wrote the file."
        assert (workspace / "notes" / "out.txt").read_text() == "hello"
        [done] = (await http.get(f"/v1/runs/{run_id}/interactions", headers=ALICE)).json()
        assert done["status"] == "executed" and done["decided_by"] == "user:alice"
        after = await decide(http, run_id, ia)
        assert after.status_code == 200 and after.json()["interaction"]["status"] == "executed"
        assert (await decide(http, run_id, ia, decision="reject")).status_code == 409

        types = [
            e["type"]
            for e in (await http.get(f"/v1/runs/{run_id}/events", headers=ALICE)).json()["events"]
        ]
        assert types.count("interaction_pending") == 1
        assert types.count("interaction_resolved") == 1
    assert await executions(database_url, run_id) == 1
    audit = AuditLog(store.pool)
    actions = [
        (e.action, e.actor)
        for e in await audit.entries("default", limit=1000)
        if (e.subject or "").startswith(run_id)
    ]
    assert ("interaction.requested", "user:alice") in actions
    assert ("interaction.approved", "user:alice") in actions
    assert ("decision.refused", "bob") in actions
    # Its own tenant's chain: test_audit.py breaks chains of other tenants on purpose.
    assert (await audit.verify("default")).ok


async def test_an_unanswered_request_expires_and_the_model_is_told(
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[write("late.txt", "x")]),
                Turn(content="Nobody approved; nothing written."),
            ]
        )
    )
    async with keel_app(llm, headers={}) as http:
        run_id = await start(http, workspace, approval_expires_after_s=1)
        [ia] = await pending(http, run_id)
        run = await finished(http, run_id)
        assert run["status"] == "completed"
        told = [m for m in llm.last_request(1)["messages"] if m["role"] == "tool"]
        assert "expired" in told[0]["content"] and "did not run" in told[0]["content"]
        late = await decide(http, run_id, ia)
        assert late.status_code == 409 and "expired" in late.text
    assert not (workspace / "late.txt").exists()


async def test_three_parallel_asks_decided_out_of_order_each_run_once(
    workspace: Path,
    database_url: str,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[write("a.txt", "A"), write("b.txt", "B"), write("c.txt", "C")]),
                Turn(content="{tool_results} results."),
            ]
        )
    )
    async with keel_app(llm, headers={}) as http:
        run_id = await start(http, workspace)
        asks = {ia["subject"]: ia for ia in await pending(http, run_id, 3)}
        assert (await decide(http, run_id, asks["c.txt"])).status_code == 200
        await wait_until((workspace / "c.txt").exists)
        # c ran as soon as it was approved, while a and b still wait.
        assert (workspace / "c.txt").read_text() == "C" and not (workspace / "a.txt").exists()
        assert (
            await decide(http, run_id, asks["a.txt"], "reject", text="not a")
        ).status_code == 200
        assert (await decide(http, run_id, asks["b.txt"])).status_code == 200
        run = await finished(http, run_id)
    assert run["status"] == "completed"
    assert (workspace / "b.txt").read_text() == "B" and not (workspace / "a.txt").exists()
    assert await executions(database_url, run_id) == 2
    told = {
        m["tool_call_id"]: m["content"]
        for m in llm.last_request(1)["messages"]
        if m["role"] == "tool"
    }
    assert "rejected" in told["call_0_0"] and "not a" in told["call_0_0"]
    assert "Created b.txt" in told["call_0_1"] and "Created c.txt" in told["call_0_2"]


async def test_approve_always_covers_the_rest_of_the_run_only(
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[write("x.txt", "1")]),
                Turn(tool_calls=[write("x.txt", "2")]),
                Turn(content="done"),
            ]
        )
    )
    async with keel_app(llm, headers={}) as http:
        run_id = await start(http, workspace)
        [ia] = await pending(http, run_id)
        assert (await decide(http, run_id, ia, "approve_always")).status_code == 200
        await finished(http, run_id)
        assert (workspace / "x.txt").read_text() == "2"
        items = (await http.get(f"/v1/runs/{run_id}/interactions", headers=ALICE)).json()
        assert len(items) == 1  # the second write did not ask

        llm.reset()
        second = await start(http, workspace)
        seen: set[str] = set()
        for _ in range(2):  # a new run (its own session) asks again, each time
            [again] = await pending(http, second, seen=seen)
            seen.add(again["id"])
            assert again["subject"] == "x.txt"
            assert (await decide(http, second, again, "reject")).status_code == 200
        await finished(http, second)
    assert (workspace / "x.txt").read_text() == "2"


async def test_denied_by_policy_and_bash_without_a_shell(
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    evil = "a; touch pwned && $(touch pwned2) `touch pwned3` | cat > out"
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(name="bash", arguments={"command": ["rm", "-rf", "/"]}),
                        ScriptedToolCall(name="bash", arguments={"command": ["echo", evil]}),
                        write(".git/config", "x"),
                    ]
                ),
                Turn(content="done"),
            ]
        )
    )
    async with keel_app(llm, headers={}) as http:
        run_id = await start(http, workspace)
        [ia] = await pending(http, run_id)
        assert ia["tool"] == "bash" and ia["subject"] == f"echo '{evil}'"
        assert (await decide(http, run_id, ia)).status_code == 200
        await finished(http, run_id)
    told = {
        m["tool_call_id"]: m["content"]
        for m in llm.last_request(1)["messages"]
        if m["role"] == "tool"
    }
    assert "denied by policy" in told["call_0_0"]
    assert evil in told["call_0_1"] and "exit code 0" in told["call_0_1"]
    assert "denied by policy" in told["call_0_2"]
    for name in ("pwned", "pwned2", "pwned3", "out"):
        assert not (workspace / name).exists()


@pytest.mark.durability  # two `keel worker` processes, one killed while the run waits
async def test_an_approval_after_a_worker_restart_is_honoured_once(
    store: Store,
    workspace: Path,
    database_url: str,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    counter = workspace / "count.txt"
    append = [sys.executable, "-c", f"open({str(counter)!r}, 'a').write('x')"]
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[ScriptedToolCall(name="bash", arguments={"command": append})]),
                Turn(content="Appended once."),
            ]
        )
    )
    settings = settings_for(llm, workspace, api_port=free_port())
    # Its own stack: the worker is a `keel worker` process, killed and replaced.
    worker = subprocess.Popen(
        [sys.executable, "-m", "keel.api.cli.main", "worker"],
        env=worker_env(settings),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    replacement: subprocess.Popen[bytes] | None = None
    try:
        async with serve_api(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
            run_id = await start(http, workspace)
            [ia] = await pending(http, run_id)
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            replacement = subprocess.Popen(
                [sys.executable, "-m", "keel.api.cli.main", "worker"],
                env=worker_env(settings),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            # Taken at once by the new worker (200), or, while it is still starting, queued
            # with Temporal for it (202); honoured once either way.
            decided = await decide(http, run_id, ia)
            queued = decided.status_code == 202
            assert decided.status_code in (200, 202), decided.text
            assert decided.json()["status"] == ("queued" if queued else "accepted")
            run = await finished(http, run_id)
        assert run["status"] == "completed"
        assert counter.read_text() == "x"
        assert await executions(database_url, run_id) == 1
    finally:
        for proc in (worker, replacement):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


async def test_a_decision_that_arrives_before_its_interaction_waits_for_it(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    # As when a worker takes over and replays a run: the decision is handled before the
    # model's reply that opens the interaction. Here the reply is simply late.
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[write("late.txt", "x")], delay_s=1.5),
                Turn(content="Not written."),
            ]
        )
    )
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace, spec=agent("build"))
        decision = InteractionDecision(
            interaction_id="ia-1-2", decision="reject", approver="anonymous", text="no"
        )
        outcome = await handle.execute_update("decide", decision, result_type=DecisionOutcome)
        assert outcome.status == "rejected"
        result = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.status == "completed" and result.steps == 2
    assert not (workspace / "late.txt").exists()
    [interaction] = await InteractionStore(store.pool).for_run(handle.id)
    assert interaction.status == "rejected"
