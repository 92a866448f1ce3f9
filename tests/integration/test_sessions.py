"""Sessions over HTTP: history, one active run, reject/enqueue/interrupt, cancel, tenancy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.integration.keel_http import MALLORY, LaunchKeel, StartLLM, eventually, run_reaches
from tests.integration.test_durability import wait_until


async def new_session(http: httpx.AsyncClient, workspace: Path, agent: str = "review") -> str:
    response = await http.post("/v1/sessions", json={"agent": agent, "workspace": str(workspace)})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def post(
    http: httpx.AsyncClient, session: str, text: str, on_busy: str = "reject"
) -> httpx.Response:
    return await http.post(
        f"/v1/sessions/{session}/messages", json={"input": text, "on_busy": on_busy}
    )


async def idle(http: httpx.AsyncClient, session: str) -> dict[str, Any] | None:
    """The session's detail once no run of it is active."""
    detail: dict[str, Any] = (await http.get(f"/v1/sessions/{session}")).json()
    return detail if detail["active_run"] is None else None


async def interactions(http: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]] | None:
    """The run's interactions once it has any."""
    items: list[dict[str, Any]] = (await http.get(f"/v1/runs/{run_id}/interactions")).json()
    return items or None


async def test_a_follow_up_message_sees_the_history(
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(content="The project adds numbers."),
                Turn(content="It has one function, add."),
            ]
        )
    )
    async with keel_app(llm) as http:
        session = await new_session(http, workspace)
        first = await post(http, session, "What does it do?")
        assert first.status_code == 202 and first.json()["position"] == 0
        await run_reaches(http, first.json()["run"]["id"], "completed")
        second = await post(http, session, "How many functions?")
        assert second.status_code == 202, second.text
        run = await run_reaches(http, second.json()["run"]["id"], "completed")
        assert run["report"] == "It has one function, add."
        sent = [(m["role"], m["content"]) for m in llm.last_request(1)["messages"]][1:]
        assert sent == [
            ("user", "What does it do?"),
            ("assistant", "The project adds numbers."),
            ("user", "How many functions?"),
        ]
        # The session workflow notices the run ended a moment later.
        detail = await eventually(lambda: idle(http, session), "the session to be idle")
        assert [m["role"] for m in detail["messages"]] == ["user", "assistant"] * 2
        assert detail["active_run"] is None and detail["queued_runs"] == []
        listed = (await http.get("/v1/sessions")).json()["sessions"]
        assert session in [s["id"] for s in listed]


async def test_reject_and_enqueue_while_a_run_is_active(
    workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    llm = scripted(Script(turns=[Turn(content="first answer"), Turn(content="second answer")]))
    llm.hold()  # the first run stays in its model call until the test is done with it
    async with keel_app(llm) as http:
        session = await new_session(http, workspace)
        first = (await post(http, session, "one")).json()["run"]["id"]
        refused = await post(http, session, "two")
        assert refused.status_code == 409 and "busy" in refused.text
        queued = await post(http, session, "two", on_busy="enqueue")
        assert queued.status_code == 202 and queued.json()["position"] == 1
        second = queued.json()["run"]["id"]
        assert (await http.get(f"/v1/runs/{second}")).json()["status"] == "queued"
        llm.release()
        a = await run_reaches(http, first, "completed")
        b = await run_reaches(http, second, "completed")
        assert b["started_at"] >= a["finished_at"]
        assert b["report"] == "second answer"


async def test_interrupt_cancels_the_active_run_then_runs(
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(Script(turns=[Turn(content="slow answer")]))
    llm.hold()
    async with keel_app(llm) as http:
        session = await new_session(http, workspace)
        first = (await post(http, session, "one")).json()["run"]["id"]
        await run_reaches(http, first, "running")
        await wait_until(lambda: llm.total_requests > 0)  # the model call is in flight
        taken = await post(http, session, "never mind, do this", on_busy="interrupt")
        assert taken.status_code == 202 and taken.json()["interrupted"] == first
        cancelled = await run_reaches(http, first, "cancelled")
        assert cancelled["stop_reason"] == "cancelled"
        llm.release()  # the held call of the cancelled run is answered to nobody
        done = await run_reaches(http, taken.json()["run"]["id"], "completed")
        assert done["report"] == "slow answer"
        events = (await http.get(f"/v1/runs/{first}/events")).json()["events"]
        assert events[-1]["type"] == "cancelled"


async def test_cancel_a_run_and_a_queued_one(
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(Script(turns=[Turn(content="answer", delay_s=3.0)]))
    async with keel_app(llm) as http:
        session = await new_session(http, workspace)
        first = (await post(http, session, "one")).json()["run"]["id"]
        queued = (await post(http, session, "two", on_busy="enqueue")).json()["run"]["id"]
        withdrawn = await http.post(f"/v1/runs/{queued}/cancel")
        assert withdrawn.status_code == 200 and withdrawn.json()["status"] == "cancelled"
        assert (await http.post(f"/v1/runs/{first}/cancel", headers=MALLORY)).status_code == 404
        await run_reaches(http, first, "running")
        cancelling = await http.post(f"/v1/runs/{first}/cancel")
        assert cancelling.status_code == 200
        await run_reaches(http, first, "cancelled")
        assert (await http.post(f"/v1/runs/{first}/cancel")).status_code == 409
        # The session workflow notices the run ended a moment later.
        detail = await eventually(lambda: idle(http, session), "the session to be idle")
        assert detail["queued_runs"] == [] and detail["active_run"] is None
    assert llm.total_requests == 1  # the withdrawn run never called the model


async def test_sessions_are_invisible_across_tenants(
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(Script(turns=[Turn(content="hi")]))
    async with keel_app(llm) as http:
        session = await new_session(http, workspace)
        run_id = (await post(http, session, "hello")).json()["run"]["id"]
        await run_reaches(http, run_id, "completed")
        assert (await http.get(f"/v1/sessions/{session}", headers=MALLORY)).status_code == 404
        stolen = await http.post(
            f"/v1/sessions/{session}/messages", headers=MALLORY, json={"input": "x"}
        )
        assert stolen.status_code == 404
        theirs = (await http.get("/v1/sessions", headers=MALLORY)).json()["sessions"]
        assert session not in [s["id"] for s in theirs]
        for path in (
            f"/v1/runs/{run_id}",
            f"/v1/runs/{run_id}/events",
            f"/v1/runs/{run_id}/interactions",
        ):
            assert (await http.get(path, headers=MALLORY)).status_code == 404
        runs = (await http.get("/v1/runs", headers=MALLORY)).json()["runs"]
        assert run_id not in [r["id"] for r in runs]
    assert llm.total_requests == 1


async def test_approve_always_lasts_for_the_session_and_not_beyond(
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    write = ScriptedToolCall(name="write_file", arguments={"path": "x.txt", "content": "1"})
    # Turns are chosen by the number of assistant messages sent, and a session's history
    # carries one per earlier run: run 1 plays turns 0-2, run 2 plays turns 1-2.
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[write]),
                Turn(
                    tool_calls=[
                        write.model_copy(update={"arguments": {"path": "x.txt", "content": "2"}})
                    ]
                ),
                Turn(content="done"),
            ]
        )
    )
    async with keel_app(llm) as http:
        session = await new_session(http, workspace, agent="build")
        first = (await post(http, session, "write 1")).json()["run"]["id"]
        [ia] = await eventually(lambda: interactions(http, first), "an approval request")
        decided = await http.post(
            f"/v1/runs/{first}/interactions/{ia['id']}",
            json={"decision": "approve_always", "payload_hash": ia["payload_hash"]},
        )
        assert decided.status_code == 200
        await run_reaches(http, first, "completed")
        second = (await post(http, session, "write 2")).json()["run"]["id"]
        done = await run_reaches(http, second, "completed")
        assert done["report"] == "done" and done["tool_calls"] == 1
        assert (await http.get(f"/v1/runs/{second}/interactions")).json() == []
        assert (workspace / "x.txt").read_text() == "2"

        other = await new_session(http, workspace, agent="build")
        llm.reset()
        third = (await post(http, other, "write 1")).json()["run"]["id"]
        items = await eventually(lambda: interactions(http, third), "an approval request")
        assert len(items) == 1 and items[0]["status"] == "pending"  # another session asks
        await http.post(f"/v1/runs/{third}/cancel")
