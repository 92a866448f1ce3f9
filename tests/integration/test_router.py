"""The capability router end to end: real HTTP API, worker, Temporal, Postgres, `openai`.

The scripted model answers the routing call from the request (`keel.worker.scripted.router`)
and plays every routed agent's single turn, so each path runs as with a real provider.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from a2a.types import GetTaskRequest, TaskState
from temporalio.client import Client

from keel.activities.store.audit import AuditLog
from keel.activities.store.records import NewRun
from keel.activities.store.router_store import RouterStore
from keel.activities.store.run_store import Store
from keel.api.identity.auth import dev_token
from keel.worker.config.settings import Settings
from keel.worker.scripted.llm import Conversation, Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.worker.scripted.router import MALFORMED_MARK, NUL_MARK
from keel.workflows.router.models import (
    Classification,
    ExcludedAgent,
    RecordRouteInput,
    RouteDecision,
)
from tests.conftest import JWT_SECRET
from tests.integration.keel_http import LaunchKeel, base_url
from tests.integration.test_a2a import a2a_client, user_message
from tests.integration.test_a2a_rest import rest_client
from tests.integration.test_approvals import ALICE
from tests.integration.test_replay import HISTORIES, replayer

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]

ANSWER = "## Answer\nRouted and answered."
DEV = ("developer",)
# `build` as the tenant's operators define it: only developers may be routed to it.
GUARDED_BUILD = """---
name: build
description: Makes changes to a workspace — edits files and runs commands — only with approval.
tools: [list_files, read_file, write_file, ask_user]
roles: [developer]
---
You make changes to the workspace, with approval.
"""


def headers(tenant: str, sub: str, *, roles: tuple[str, ...] = (), admin: bool = False) -> dict:
    scopes = ("keel:admin",) if admin else ()
    token = dev_token(JWT_SECRET, tenant, sub, scopes=scopes, roles=roles)
    return {"authorization": f"Bearer {token}"}


async def routed(http: httpx.AsyncClient, workspace: Path, text: str, **extra: Any) -> str:
    body = {"agent": "auto", "input": text, "workspace": str(workspace), **extra}
    response = await http.post("/v1/runs", json=body)
    assert response.status_code == 201, response.text
    assert response.json()["agent"] == "auto"
    return str(response.json()["id"])


async def finished(
    http: httpx.AsyncClient, run_id: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    for _ in range(1200):
        run: dict[str, Any] = (await http.get(f"/v1/runs/{run_id}", headers=headers)).json()
        if run["status"] in ("completed", "failed", "cancelled"):
            return run
        await asyncio.sleep(0.05)
    raise AssertionError(f"{run_id} did not finish")


async def question(http: httpx.AsyncClient, run_id: str, seen: set[str]) -> dict[str, Any]:
    for _ in range(600):
        items = (await http.get(f"/v1/runs/{run_id}/interactions")).json()
        waiting = [i for i in items if i["status"] == "pending" and i["id"] not in seen]
        if waiting:
            return dict(waiting[0])
        await asyncio.sleep(0.05)
    raise AssertionError(f"{run_id} never asked")


async def answer(http: httpx.AsyncClient, run_id: str, ia: dict[str, Any], text: str) -> None:
    response = await http.post(
        f"/v1/runs/{run_id}/interactions/{ia['id']}", json={"decision": "answer", "text": text}
    )
    assert response.status_code == 200, response.text


async def decisions(http: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    response = await http.get(f"/v1/runs/{run_id}/route")
    assert response.status_code == 200, response.text
    return list(response.json())


async def route_events(http: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    page = (await http.get(f"/v1/runs/{run_id}/events")).json()
    return [e["data"] for e in page["events"] if e["type"] == "route_decision"]


async def audited(admin: httpx.AsyncClient, tenant: str) -> list[tuple[str, str]]:
    rows = (await admin.get("/v1/admin/audit", params={"tenant": tenant, "limit": 1000})).json()
    return [(r["action"], r["subject"]) for r in rows if r["category"] == "router"]


async def test_routed_refused_clarified_and_malformed_paths(
    temporal_client: Client,
    workspace: Path,
    tmp_path: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    agents_dir = tmp_path / "agents"
    agents_dir.mkdir()
    (agents_dir / "build.md").write_text(GUARDED_BUILD)
    llm = scripted(Script(turns=[Turn(content=ANSWER)]))
    tenant = f"router-{uuid.uuid4().hex[:8]}"
    async with (
        keel_app(llm, headers=headers(tenant, "root", admin=True), agents_dir=agents_dir) as admin,
        httpx.AsyncClient(
            base_url=base_url(admin), headers=headers(tenant, "dev", roles=("developer",))
        ) as dev,
        httpx.AsyncClient(base_url=base_url(admin), headers=headers(tenant, "viewer")) as viewer,
    ):
        # The tenant enables three agents; a non-admin may not change that (audited).
        default = (await admin.get(f"/v1/admin/router/tenants/{tenant}")).json()
        assert default["default"] is True and "explore" in default["agents"]
        refused = await dev.put(f"/v1/admin/router/tenants/{tenant}", json={"agents": []})
        assert refused.status_code == 403
        unknown = await admin.put(f"/v1/admin/router/tenants/{tenant}", json={"agents": ["zz"]})
        assert unknown.status_code == 422 and "Unknown agents ['zz']" in unknown.text
        set_ = await admin.put(
            f"/v1/admin/router/tenants/{tenant}",
            json={"agents": ["review", "investigate", "build"]},
        )
        assert set_.status_code == 200, set_.text
        assert set_.json()["agents"] == ["build", "investigate", "review"]

        # 1. Routed to the right one of three: a child run with lineage, the router's
        # report is the child's.
        run_id = await routed(dev, workspace, "Investigate why add() ignores None values.")
        run = await finished(dev, run_id)
        assert run["status"] == "completed", run
        assert run["report"] == ANSWER
        [child] = run["children"]
        assert child["agent"] == "investigate" and child["status"] == "completed"
        # The classification is a model call of the router's own, traced and counted.
        assert run["usage"]["prompt_tokens"] == 100
        assert run["total_usage"]["prompt_tokens"] == 200
        child_run = (await dev.get(f"/v1/runs/{child['id']}")).json()
        assert child_run["parent_run_id"] == run_id and child_run["trigger"] == "parent"
        assert child_run["input"] == "Investigate why add() ignores None values."
        [decision] = await decisions(dev, run_id)
        assert decision["outcome"] == "routed" and decision["agent"] == "investigate"
        assert decision["candidates"] == ["build", "investigate", "review"]
        assert {"name": "explore", "reason": "not_enabled"} in decision["excluded"]
        [event] = await route_events(dev, run_id)
        assert event["outcome"] == "routed" and event["candidates"] == decision["candidates"]
        routed_id = run_id
        # The hand-over reads as a `task` call that ran: its result and the child's end.
        page = (await dev.get(f"/v1/runs/{run_id}/events")).json()["events"]
        [result] = [e["data"] for e in page if e["type"] == "tool_result"]
        assert result["name"] == "task" and result["preview"] == ANSWER
        ends = [e["data"]["status"] for e in page if e["type"] == "child_run"]
        assert ends == ["running", "completed"]

        # 2. Refused: the request needs `build`, which the caller's roles may not use.
        run_id = await routed(viewer, workspace, "Ask the build agent to write notes.txt.")
        run = await finished(viewer, run_id)
        assert run["status"] == "completed" and run["children"] == []
        assert run["report"].startswith("Refused: The request needs an agent your roles may")
        # The caller is never shown the names of agents their roles exclude: not in the
        # report, the decision they read, or its event (the model's pick included).
        assert "build" not in run["report"]
        [decision] = await decisions(viewer, run_id)
        assert decision["outcome"] == "refused" and decision["candidates"] == [
            "investigate",
            "review",
        ]
        assert decision["agent"] is None and decision["classification"]["agent"] is None
        assert {e["reason"] for e in decision["excluded"]} == {"not_enabled"}
        [event] = await route_events(viewer, run_id)
        assert event["outcome"] == "refused" and "your roles may not use" in event["reason"]
        assert "build" not in json.dumps(event)
        # Admins (and the audit trail) see all of it.
        [full] = await decisions(admin, run_id)
        assert full["agent"] == "build" and {"name": "build", "reason": "role"} in full["excluded"]
        refused_id = run_id

        # 3. Ambiguous: the router asks back; the answer completes the routing.
        run_id = await routed(dev, workspace, "Can you help me please?")
        ia = await question(dev, run_id, set())
        assert ia["kind"] == "ask_user" and "I can route to" in ia["question"]
        await answer(dev, run_id, ia, "Review the code for bugs.")
        run = await finished(dev, run_id)
        assert run["status"] == "completed" and run["report"] == ANSWER
        [child] = run["children"]
        assert child["agent"] == "review"
        child_input = (await dev.get(f"/v1/runs/{child['id']}")).json()["input"]
        assert "Review the code for bugs." in child_input
        outcomes = [(d["outcome"], d["agent"]) for d in await decisions(dev, run_id)]
        assert outcomes == [("clarifying", None), ("routed", "review")]
        assert [e["outcome"] for e in await route_events(dev, run_id)] == ["clarifying", "routed"]
        clarified_id = run_id
        # Its history (a question, an answer, a hand-over) replays on the current code.
        history = await temporal_client.get_workflow_handle(run_id).fetch_history()
        assert (await replayer().replay_workflow(history)).replay_failure is None
        if os.environ.get("KEEL_RECORD_HISTORY"):
            # KEEL_RECORD_HISTORY=1 adds it to the histories future code must replay.
            target = HISTORIES / "agent_run_router.json"
            target.write_text(json.dumps(history.to_json_dict(), indent=1))

        # 4. A malformed classification is never a guess: it asks, then routes the answer.
        run_id = await routed(dev, workspace, f"{MALFORMED_MARK} review the code")
        ia = await question(dev, run_id, set())
        await answer(dev, run_id, ia, "Investigate the parser.")
        run = await finished(dev, run_id)
        assert run["status"] == "completed"
        [child] = run["children"]
        assert child["agent"] == "investigate"
        first, second = await decisions(dev, run_id)
        assert first["outcome"] == "clarifying" and first["classification"]["kind"] == "malformed"
        assert second["outcome"] == "routed"
        malformed_id = run_id

        # 5. route_only: the decision, no run of the agent.
        run_id = await routed(dev, workspace, "Review the code.", route_only=True)
        run = await finished(dev, run_id)
        assert run["children"] == [] and run["report"].startswith("Route: review")
        only_id = run_id

        # Another tenant sees none of it.
        other = headers("someone-else", "eve")
        stranger = await viewer.get(f"/v1/runs/{refused_id}/route", headers=other)
        assert stranger.status_code == 404

        # Every decision is audited in the tenant's chain.
        trail = await audited(admin, tenant)
        for subject, action in [
            (f"{routed_id}/1", "route.routed"),
            (f"{refused_id}/1", "route.refused"),
            (f"{clarified_id}/1", "route.clarifying"),
            (f"{clarified_id}/2", "route.routed"),
            (f"{malformed_id}/1", "route.clarifying"),
            (f"{malformed_id}/2", "route.routed"),
            (f"{only_id}/1", "route.route_only"),
        ]:
            assert (action, subject) in trail, (action, subject, trail)
        assert ("router.agents_set", tenant) in [
            (r["action"], r["subject"])
            for r in (await admin.get("/v1/admin/audit", params={"tenant": tenant})).json()
        ]
        verified = (await admin.get("/v1/admin/audit/verify", params={"tenant": tenant})).json()
        assert verified["ok"] is True, verified


async def test_a_classification_holding_a_nul_asks_back_instead_of_failing_the_run(
    workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    """Postgres refuses NUL in jsonb: such an answer is malformed, so the router asks."""
    llm = scripted(Script(turns=[Turn(content=ANSWER)]))
    tenant = f"router-{uuid.uuid4().hex[:8]}"
    async with (
        keel_app(llm, headers=headers(tenant, "dev", roles=DEV)) as dev,
        httpx.AsyncClient(
            base_url=base_url(dev), headers=headers(tenant, "root", admin=True)
        ) as admin,
    ):
        run_id = await routed(dev, workspace, f"{NUL_MARK} review the code")
        ia = await question(dev, run_id, set())
        assert ia["kind"] == "ask_user"
        await answer(dev, run_id, ia, "Investigate the parser.")
        run = await finished(dev, run_id)
        assert run["status"] == "completed", run
        [child] = run["children"]
        assert child["agent"] == "investigate"
        first, second = await decisions(dev, run_id)
        assert first["outcome"] == "clarifying" and first["classification"]["kind"] == "malformed"
        assert "NUL" in first["classification"]["reason"] and "\0" not in json.dumps(first)
        assert second["outcome"] == "routed"
        trail = await audited(admin, tenant)
        assert ("route.clarifying", f"{run_id}/1") in trail, trail


async def test_a_decision_quoting_a_nul_is_recorded_escaped(store: Store) -> None:
    """Whatever text reaches the router's records, Postgres's refusal of NUL never fails them."""
    run_id, tenant = f"run-{uuid.uuid4().hex[:10]}", f"router-{uuid.uuid4().hex[:8]}"
    await store.create_run(
        NewRun(
            run_id=run_id,
            tenant_id=tenant,
            agent="auto",
            model="scripted",
            requester="user:dev",
            trigger="api",
            workspace="/tmp",
            input="Review the code.",
        )
    )
    record = RecordRouteInput(
        run_id=run_id,
        tenant_id=tenant,
        requester="user:dev",
        round=1,
        event_seq=1,
        decision=RouteDecision(outcome="routed", agent="review", reason="Review\0 fits."),
        classification=Classification(kind="agent", agent="review", reason="Review\0 fits."),
        candidates=["review", "odd\0name"],
        excluded=[ExcludedAgent(name="de\0ploy", reason="role")],
    )
    await RouterStore(store.pool).record(record, "Review the code.\0")
    [decision] = await RouterStore(store.pool).decisions(run_id)
    assert decision.candidates == ["review", "odd\\x00name"]
    assert decision.classification["reason"] == "Review\\x00 fits."
    [entry] = [e for e in await AuditLog(store.pool).entries(tenant) if e.category == "router"]
    assert entry.detail["reason"] == "Review\\x00 fits."
    assert (await AuditLog(store.pool).verify(tenant)).ok


async def test_sessions_a2a_and_an_unanswered_question_reach_the_router(
    workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    write = ScriptedToolCall(name="write_file", arguments={"path": "notes.txt", "content": "hi"})
    llm = scripted(
        Script(
            turns=[Turn(content=ANSWER)],
            conversations=[
                Conversation(
                    match="write notes.txt",
                    turns=[Turn(tool_calls=[write]), Turn(content="Wrote notes.txt.")],
                )
            ],
        )
    )
    tenant = f"router-{uuid.uuid4().hex[:8]}"
    alice = headers(tenant, "alice")
    async with keel_app(llm, http_timeout=60, headers=alice) as http:
        url = base_url(http)
        listed = (await http.get("/v1/agents")).json()
        assert listed[-1]["name"] == "auto" and listed[-1]["tools"] == []
        # A session message may ask the router, whatever the session's agent.
        created = await http.post(
            "/v1/sessions", json={"agent": "review", "workspace": str(workspace)}
        )
        assert created.status_code == 201, created.text
        session_id = created.json()["id"]
        posted = await http.post(
            f"/v1/sessions/{session_id}/messages",
            json={"input": "Investigate the parser.", "agent": "auto"},
        )
        assert posted.status_code == 202, posted.text
        run = await finished(http, posted.json()["run"]["id"])
        assert run["agent"] == "auto" and run["session_id"] == session_id
        assert [c["agent"] for c in run["children"]] == ["investigate"]
        history = (await http.get(f"/v1/sessions/{session_id}")).json()
        assert ANSWER in [m["content"] for m in history["messages"]]
        wrong = await http.post(
            f"/v1/sessions/{session_id}/messages", json={"input": "x", "agent": "build"}
        )
        assert wrong.status_code == 422

        # A2A: `auto` is an agent endpoint with its card, and a skill of the root card.
        root_card = (await http.get("/.well-known/agent-card.json")).json()
        assert "auto" in {s["id"] for s in root_card["skills"]}
        card = await http.get("/a2a/auto/.well-known/agent-card.json")
        assert card.status_code == 200 and [s["id"] for s in card.json()["skills"]] == ["auto"]
        sent = await http.post(
            "/a2a/auto",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": "m-route",
                        "role": "ROLE_USER",
                        "parts": [{"text": "Review the code for bugs."}],
                    }
                },
            },
            headers={"A2A-Version": "1.0"},
        )
        task = sent.json()["result"]["task"]
        run = await finished(http, task["id"])
        assert run["agent"] == "auto" and run["trigger"] == "a2a"
        assert [c["agent"] for c in run["children"]] == ["review"]
        assert run["report"] == ANSWER
        # Over the a2a-sdk client: the router's question is `input-required`, and the
        # next message of the task answers it.
        async with a2a_client(url, streaming=False, agent="auto") as client:
            [first] = [r async for r in client.send_message(user_message("Help me please?"))]
            task_id = first.task.id
            assert first.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            reply = user_message("Investigate the parser.", task_id=task_id)
            _ = [r async for r in client.send_message(reply)]
            task = await client.get_task(GetTaskRequest(id=task_id, history_length=10))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            assert task.history[-1].parts[0].text == ANSWER
        run = await finished(http, task_id, headers=ALICE)
        assert [c["agent"] for c in run["children"]] == ["investigate"]

        # A routed agent's approval shows on the router run and is decided through it.
        run_id = await routed(http, workspace, "Ask the build agent to write notes.txt.")
        ia = await question(http, run_id, set())
        assert ia["kind"] == "confirm" and ia["tool"] == "write_file"
        assert ia["run_id"] != run_id  # the child's, listed with the router's
        approved = await http.post(
            f"/v1/runs/{run_id}/interactions/{ia['id']}",
            json={"decision": "approve", "payload_hash": ia["payload_hash"]},
        )
        assert approved.status_code == 200, approved.text
        run = await finished(http, run_id)
        assert run["status"] == "completed" and run["report"] == "Wrote notes.txt."
        assert (workspace / "notes.txt").read_text() == "hi"

        # Two tenants choosing one run id each get their own router run, shown by that id.
        chosen = f"same-{uuid.uuid4().hex[:6]}"
        for who in (alice, headers(f"{tenant}-b", "bob")):
            body = {"agent": "auto", "input": "Review the code.", "workspace": str(workspace)}
            started = await http.post(
                "/v1/runs", json={**body, "run_id": chosen, "route_only": True}, headers=who
            )
            assert started.status_code == 201 and started.json()["id"] == chosen, started.text
            await finished(http, chosen, headers=who)
            [only] = (await http.get(f"/v1/runs/{chosen}/route", headers=who)).json()
            assert only["run_id"] == chosen and only["outcome"] == "route_only"

        # A question nobody answers expires: a refusal, on record like every decision.
        run_id = await routed(
            http, workspace, "Can you help me please?", approval_expires_after_s=1
        )
        run = await finished(http, run_id)
        assert run["status"] == "completed" and run["children"] == []
        assert "question was not answered" in run["report"]
        assert [d["outcome"] for d in await decisions(http, run_id)] == ["clarifying", "refused"]
        [ia] = (await http.get(f"/v1/runs/{run_id}/interactions")).json()
        assert ia["status"] == "expired"


async def test_the_auto_agents_http_json_binding_routes_the_request(
    workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    """The `auto` card names `/a2a/auto/rest`; the a2a-sdk client over HTTP+JSON reaches
    the router there, as over JSON-RPC."""
    llm = scripted(Script(turns=[Turn(content=ANSWER)]))
    alice = headers(f"router-{uuid.uuid4().hex[:8]}", "alice")
    async with keel_app(llm, http_timeout=60, headers=alice) as http:
        url = base_url(http)
        card = (await http.get("/a2a/auto/.well-known/agent-card.json")).json()
        bindings = {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}
        assert bindings["HTTP+JSON"] == f"{url}/a2a/auto/rest"
        async with rest_client(url, alice, "auto") as client:
            [sent] = [r async for r in client.send_message(user_message("Review the code."))]
            assert sent.task.status.state == TaskState.TASK_STATE_COMPLETED
            task = await client.get_task(GetTaskRequest(id=sent.task.id))
            assert task.artifacts[0].parts[0].text == ANSWER
        run = await finished(http, sent.task.id)
        assert run["agent"] == "auto" and [c["agent"] for c in run["children"]] == ["review"]


async def test_a_routed_agents_approval_is_the_a2a_tasks_input_and_its_reply_decides_it(
    workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    """The approval the sub-agent waits on (stored for the child run) is what the parent's
    A2A task asks; the next message of the task approves it, through the parent."""
    write = ScriptedToolCall(name="write_file", arguments={"path": "notes.txt", "content": "hi"})
    llm = scripted(
        Script(
            turns=[Turn(content=ANSWER)],
            conversations=[
                Conversation(
                    match="write notes.txt",
                    turns=[Turn(tool_calls=[write]), Turn(content="Wrote notes.txt.")],
                )
            ],
        )
    )
    async with (
        keel_app(llm, http_timeout=60, headers=ALICE) as http,
        a2a_client(base_url(http), streaming=False, agent="auto") as client,
    ):
        ask = user_message("Ask the build agent to write notes.txt.")
        [first] = [r async for r in client.send_message(ask)]
        task_id = first.task.id
        assert first.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        asked = first.task.status.message.parts[0].text
        assert "Approve write_file" in asked and f"[{task_id}-" in asked  # the child's
        _ = [r async for r in client.send_message(user_message("approve", task_id=task_id))]
        run = await finished(http, task_id)
        assert run["status"] == "completed" and run["report"] == "Wrote notes.txt."
        assert [c["agent"] for c in run["children"]] == ["build"]
        assert (workspace / "notes.txt").read_text() == "hi"
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
