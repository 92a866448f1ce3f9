"""A run that ends without a decision ends what it waited on: every surface says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from keel.activities.store.audit import AuditLog
from keel.activities.store.run_store import Store
from keel.worker.scripted.llm import Script, Turn
from tests.integration.keel_http import ALICE, LaunchKeel, finished, pending, run_reaches
from tests.integration.test_approvals import decide, start, write


async def a2a_task(http: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    response = await http.post(
        "/a2a",
        headers={**ALICE, "A2A-Version": "1.0"},
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}},
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]
    return result


async def inbox(http: httpx.AsyncClient) -> set[str]:
    response = await http.get("/v1/interactions", headers=ALICE)
    assert response.status_code == 200, response.text
    return {f"{i['run_id']}/{i['id']}" for i in response.json()}


async def test_a_cancelled_or_terminated_run_ends_its_interactions(
    temporal_client: Client, store: Store, workspace: Path, keel_app: LaunchKeel
) -> None:
    script = Script(turns=[Turn(tool_calls=[write("a.txt", "a")]), Turn(content="Done.")])
    async with keel_app(script, headers={}) as http:
        cancelled_run = await start(http, workspace)
        terminated_run = await start(http, workspace)
        asked = (await pending(http, cancelled_run))[0]
        other = (await pending(http, terminated_run))[0]
        assert {f"{cancelled_run}/{asked['id']}", f"{terminated_run}/{other['id']}"} <= (
            await inbox(http)
        )
        assert (await a2a_task(http, cancelled_run))["status"]["state"] == (
            "TASK_STATE_INPUT_REQUIRED"
        )

        # Cancelled through REST while it waits for the approval.
        response = await http.post(f"/v1/runs/{cancelled_run}/cancel", headers=ALICE)
        assert response.status_code == 200, response.text
        assert (await finished(http, cancelled_run))["status"] == "cancelled"
        # Its event stream tells the interaction resolved, then the end: no gap, no repeat.
        page = await http.get(f"/v1/runs/{cancelled_run}/events?after=0", headers=ALICE)
        events = page.json()["events"]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        resolved, end = events[-2:]
        assert resolved["type"] == "interaction_resolved", events
        assert (resolved["data"]["interaction_id"], resolved["data"]["status"]) == (
            asked["id"],
            "cancelled",
        )
        assert end["type"] == "cancelled" and end["data"]["stop_reason"] == "cancelled", end
        # Terminated in Temporal: no finish is recorded, the first read finds out.
        await temporal_client.get_workflow_handle(terminated_run).terminate("operator")
        await run_reaches(http, terminated_run, "failed", headers=ALICE, within=10)

        for run_id, ia in ((cancelled_run, asked), (terminated_run, other)):
            listed = (await http.get(f"/v1/runs/{run_id}/interactions", headers=ALICE)).json()
            assert [(i["id"], i["status"]) for i in listed] == [(ia["id"], "cancelled")]
            one = await http.get(f"/v1/runs/{run_id}/interactions/{ia['id']}", headers=ALICE)
            assert one.json()["status"] == "cancelled"
            assert (await http.get(f"/v1/runs/{run_id}", headers=ALICE)).json()[
                "pending_interactions"
            ] == []
        assert not {f"{cancelled_run}/{asked['id']}", f"{terminated_run}/{other['id']}"} & (
            await inbox(http)
        )
        task = await a2a_task(http, cancelled_run)
        assert task["status"]["state"] == "TASK_STATE_CANCELED"
        assert "message" not in task["status"], "a cancelled task asks nothing"
        task = await a2a_task(http, terminated_run)
        assert task["status"]["state"] == "TASK_STATE_FAILED"

        # A decision on either is refused with a sentence, and audited.
        for run_id, ia, ended in (
            (cancelled_run, asked, "cancelled"),
            (terminated_run, other, "failed"),
        ):
            refused = await decide(http, run_id, ia)
            assert refused.status_code == 409, refused.text
            assert refused.json()["detail"] == (
                f"Interaction {ia['id']} was cancelled: run {run_id} ended ({ended}) before "
                "anyone decided it, so nothing waits for a decision any more; start a new "
                "run to do the work."
            )
            # Through A2A too: the task waits for no input.
            answer = await http.post(
                "/a2a",
                headers={**ALICE, "A2A-Version": "1.0"},
                json={
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "SendMessage",
                    "params": {
                        "message": {
                            "messageId": f"m-{run_id}",
                            "role": "ROLE_USER",
                            "taskId": run_id,
                            "parts": [{"text": "approve"}],
                        }
                    },
                },
            )
            assert "is not waiting for input" in answer.json()["error"]["message"]

    audit = [
        e
        for e in await AuditLog(store.pool).entries("default", limit=100_000)
        if e.subject in (f"{cancelled_run}/{asked['id']}", f"{terminated_run}/{other['id']}")
    ]
    for subject in (f"{cancelled_run}/{asked['id']}", f"{terminated_run}/{other['id']}"):
        assert [e.action for e in audit if e.subject == subject] == [
            "interaction.requested",
            "interaction.cancelled",
            "decision.refused",
        ]
    assert not (workspace / "a.txt").exists()
