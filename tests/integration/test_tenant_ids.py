"""Ids per tenant (issue 21, #18): two tenants choosing the same run, session, context
and schedule ids each get their own, on every surface, and neither learns of the other.

The defect: tenant B was told 409 "taken" for tenant A's run, session and schedule ids,
A2A said "that context belongs to someone else", MCP start_run likewise.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from ag_ui.core import EventType, RunAgentInput, UserMessage
from langgraph_sdk.schema import Command

from keel.activities.store.audit import AuditLog
from keel.activities.store.run_store import Store
from keel.api.core.tenant_ids import scoped
from keel.worker.scripted.llm import Conversation, Script, Turn
from tests.conftest import auth_headers, token_for
from tests.integration.keel_http import ENDED, LaunchKeel, base_url, eventually, run_reaches
from tests.integration.test_agui import run_agent
from tests.integration.test_approvals import write
from tests.integration.test_langgraph import client_for
from tests.integration.test_mcp import call, mcp_client, until_run
from tests.integration.test_surface_parity import a2a, text_message


def tenants() -> dict[str, dict[str, str]]:
    """Two fresh tenants, so lists and audits hold only this test's."""
    tag = uuid.uuid4().hex[:8]
    return {f"a-{tag}": auth_headers(f"a-{tag}", "ann"), f"b-{tag}": auth_headers(f"b-{tag}", "bo")}


def shows_no_scope(answer: Any, tenant: str) -> None:
    """No answer a tenant gets shows the scoped keys Keel keeps its ids under."""
    assert f"{tenant}~" not in json.dumps(answer), answer


async def test_two_tenants_with_the_same_ids_each_get_their_own_on_every_surface(
    store: Store, workspace: Path, keel_app: LaunchKeel
) -> None:
    script = Script(turns=[Turn(content=f"Answer {i}.") for i in range(16)])
    people = tenants()
    tag = uuid.uuid4().hex[:8]
    run_id, session_id, context_id = f"run-same-{tag}", f"ses-same-{tag}", f"ctx-same-{tag}"
    schedule_id = f"sch-same-{tag}"
    async with keel_app(script, http_timeout=60, a2a_default_agent="review") as http:
        # -- REST runs: the same run_id is each tenant's own run.
        for tenant, headers in people.items():
            body = {"agent": "review", "input": f"{tenant} asks.", "workspace": str(workspace)}
            created = await http.post("/v1/runs", headers=headers, json={**body, "run_id": run_id})
            assert created.status_code == 201, created.text
            assert created.json()["id"] == run_id
            run = await run_reaches(http, run_id, headers=headers)
            assert run["input"] == f"{tenant} asks." and run["status"] == "completed"
            again = await http.post("/v1/runs", headers=headers, json={**body, "run_id": run_id})
            assert again.status_code == 201 and again.json()["input"] == f"{tenant} asks."
            events = (await http.get(f"/v1/runs/{run_id}/events", headers=headers)).json()
            assert events["events"][0]["type"] == "run_started"
            listed = (await http.get("/v1/runs", headers=headers)).json()["runs"]
            assert [r["id"] for r in listed] == [run_id]
            for answer in (run, events, listed):
                shows_no_scope(answer, tenant)
        first, second = people
        assert (await store.get_run(run_id)) is not None
        kept = await store.get_run(scoped(second, run_id))
        assert kept is not None and kept.tenant_id == second  # the second is kept scoped

        # -- REST sessions: the same session id, each tenant's own conversation.
        for tenant, headers in people.items():
            made = await http.post(
                "/v1/sessions",
                headers=headers,
                json={"session_id": session_id, "agent": "review", "workspace": str(workspace)},
            )
            assert made.status_code == 201 and made.json()["id"] == session_id, made.text
            posted = await http.post(
                f"/v1/sessions/{session_id}/messages",
                headers=headers,
                json={"input": f"{tenant} says hi."},
            )
            assert posted.status_code == 202, posted.text
            assert posted.json()["run"]["session_id"] == session_id
            await run_reaches(http, posted.json()["run"]["id"], headers=headers)
            history = (await http.get(f"/v1/sessions/{session_id}", headers=headers)).json()
            assert [m["content"] for m in history["messages"] if m["role"] == "user"] == [
                f"{tenant} says hi."
            ]
            shows_no_scope(history, tenant)

        # -- A2A: the same contextId is each tenant's own context.
        tasks = {}
        for tenant, headers in people.items():
            sent = await a2a(http, text_message(f"{tenant} on A2A.", contextId=context_id), headers)
            assert "result" in sent, sent
            task = sent["result"]["task"]
            assert task["contextId"] == context_id
            tasks[tenant] = task["id"]
            shows_no_scope(sent, tenant)
            listed = await http.post(
                "/a2a",
                headers={**headers, "A2A-Version": "1.0"},
                json={
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "ListTasks",
                    "params": {"contextId": context_id},
                },
            )
            assert [t["id"] for t in listed.json()["result"]["tasks"]] == [task["id"]]
        # A task id is still the other tenant's own business: not found.
        peek = await http.post(
            "/a2a",
            headers={**people[second], "A2A-Version": "1.0"},
            json={"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": tasks[first]}},
        )
        assert peek.json()["error"]["code"] == -32001, peek.text

        # -- MCP: start_run with the same run id another tenant chose.
        mcp_run = f"mcp-same-{tag}"
        for tenant in people:
            name = "ann" if tenant == first else "bo"
            async with mcp_client(base_url(http), token_for(tenant, name)) as client:
                started = await call(
                    client,
                    "start_run",
                    agent="review",
                    input=f"{tenant} over MCP.",
                    workspace=str(workspace),
                    run_id=mcp_run,
                )
                assert started["run_id"] == mcp_run
                detail = await until_run(client, mcp_run, lambda d: d["run"]["status"] in ENDED)
                assert detail["run"]["input"] == f"{tenant} over MCP."
                summaries = (await call(client, "list_runs", limit=50))["runs"]
                assert mcp_run in [r["id"] for r in summaries]
                shows_no_scope([started, detail, summaries], tenant)

        # -- Schedules: the same schedule id, each tenant's own schedule and runs.
        for tenant, headers in people.items():
            created = await http.post(
                "/v1/schedules",
                headers=headers,
                json={
                    "schedule_id": schedule_id,
                    "agent": "review",
                    "input": f"{tenant} nightly.",
                    "workspace": str(workspace),
                    "cron_expressions": ["0 4 * * *"],
                    "paused": True,
                },
            )
            assert created.status_code == 201, created.text
            assert created.json()["id"] == schedule_id
        try:
            for tenant, headers in people.items():
                shown = (await http.get(f"/v1/schedules/{schedule_id}", headers=headers)).json()
                assert shown["id"] == schedule_id and shown["input"] == f"{tenant} nightly."
                fired = await http.post(f"/v1/schedules/{schedule_id}/trigger", headers=headers)
                fired_run = fired.json()["run_id"]
                assert fired_run and fired_run.startswith(f"run-{schedule_id}"), fired.text

                async def own_run(headers: dict[str, str] = headers) -> list[Any] | None:
                    path = f"/v1/schedules/{schedule_id}/runs"
                    runs = (await http.get(path, headers=headers)).json()["runs"]
                    return runs or None

                # Listed first: both schedules may fire within one second, so both runs
                # are `run-ID-<same time>`, and reading the id before this tenant's run is
                # recorded would find the other's (404, audited).
                runs = await eventually(own_run, "the schedule's runs")
                assert [r["id"] for r in runs] == [fired_run]
                run = await run_reaches(http, fired_run, headers=headers)
                assert run["schedule_id"] == schedule_id and run["input"] == f"{tenant} nightly."
                shows_no_scope([shown, fired.json(), run, runs], tenant)
        finally:
            for headers in people.values():
                deleted = await http.delete(f"/v1/schedules/{schedule_id}", headers=headers)
                assert deleted.status_code == 204, deleted.text

    # Choosing an id another tenant holds is nobody's wrongdoing: nothing was denied
    # but the one GetTask of the other's task id.
    for tenant in people:
        denied = [
            e.subject
            for e in await AuditLog(store.pool).entries(tenant, limit=1000)
            if e.action.endswith("cross_tenant_denied")
        ]
        assert denied == ([tasks[first]] if tenant == second else []), (tenant, denied)


async def test_two_tenants_with_the_same_thread_id_each_get_their_own_over_langgraph_and_agui(
    workspace: Path, keel_app: LaunchKeel
) -> None:
    """The LangGraph SDK and AG-UI on one thread id two tenants chose: each its own thread,
    its runs work, and no answer shows a scoped key or anything of the other tenant."""
    people = tenants()
    writes = [  # a write that waits for approval, in each tenant's own file
        Conversation(
            match=f"Write it for {t}.",
            turns=[Turn(tool_calls=[write(t, t)]), Turn(content="Wrote it.")],
        )
        for t in people
    ]
    script = Script(turns=[Turn(content="Answer."), Turn(content="Again.")], conversations=writes)
    tag = uuid.uuid4().hex[:8]
    thread_id, agui_thread = f"thread-same-{tag}", f"agui-same-{tag}"
    approve_thread = f"approve-same-{tag}"
    async with keel_app(script, headers={}, http_timeout=60) as http:
        url = base_url(http)
        for tenant in people:
            lg = client_for(url, tenant, "someone")
            ask = {"messages": [{"role": "user", "content": f"{tenant} asks."}]}
            thread = await lg.threads.create(
                thread_id=thread_id, metadata={"graph_id": "review"}, if_exists="raise"
            )
            values = await lg.runs.wait(thread_id, "review", input=ask)
            streamed = [p async for p in lg.runs.stream(thread_id, "review", input=ask)]
            runs = await lg.runs.list(thread_id)
            answers: list[Any] = [thread, values, [p.data for p in streamed], runs]
            answers += [
                await lg.runs.get(thread_id, runs[0]["run_id"]),
                await lg.threads.get(thread_id),
                await lg.threads.get_state(thread_id),
                await lg.threads.get_history(thread_id),
                found := await lg.threads.search(),
            ]
            shows_no_scope(answers, tenant)
            assert thread["thread_id"] == thread_id and [r["status"] for r in runs] == [
                "success",
                "success",
            ]
            assert {r["thread_id"] for r in runs} == {thread_id}
            humans = [m["content"] for m in values["messages"] if m["type"] == "human"]
            assert humans == [f"{tenant} asks."]  # nothing of the other tenant's thread
            assert [t["thread_id"] for t in found] == [thread_id]
            assert streamed[0].data["run_id"] in {r["run_id"] for r in runs}
            # An interrupt on a new thread of that id, resumed: the same run goes on.
            write_ask = {"messages": [{"role": "user", "content": f"Write it for {tenant}."}]}
            waiting = [
                p.data
                async for p in lg.runs.stream(
                    approve_thread,
                    "build",
                    input=write_ask,
                    if_not_exists="create",
                    stream_mode="updates",
                )
            ]
            value = waiting[-1]["__interrupt__"][0]["value"]
            decision = {"decision": "approve", "payload_hash": value["payload_hash"]}
            resumed = [
                p.data
                async for p in lg.runs.stream(
                    approve_thread, "build", command=Command(resume=decision), stream_mode="updates"
                )
            ]
            shows_no_scope([waiting, value, resumed], tenant)
            assert resumed[0]["run_id"] == waiting[0]["run_id"], "the same durable run goes on"
            assert resumed[-1]["agent"]["messages"][0]["content"] == "Wrote it."
            assert (workspace / tenant).read_text() == tenant
        for tenant, headers in people.items():
            events: list[Any] = []
            for turn in ("first", "second"):
                body = RunAgentInput(
                    thread_id=agui_thread,
                    run_id=f"agui-run-{turn}-{tag}",
                    messages=[UserMessage(id="m1", content=f"{tenant} {turn}.")],
                )
                got = await run_agent(http, "review", body, headers)
                assert got[-1].type == EventType.RUN_FINISHED, got[-1]
                events += [e.model_dump(mode="json", by_alias=True) for e in got]
            shows_no_scope(events, tenant)
            assert {e["threadId"] for e in events if "threadId" in e} == {agui_thread}
            mine = await http.get(f"/v1/sessions/{agui_thread}", headers=headers)
            assert mine.status_code == 200 and mine.json()["id"] == agui_thread
            shows_no_scope(mine.json(), tenant)
            asked = [m["content"] for m in mine.json()["messages"] if m["role"] == "user"]
            assert asked == [f"{tenant} first.", f"{tenant} second."]
