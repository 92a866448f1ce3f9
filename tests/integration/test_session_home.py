"""A session whose workflow another Keel started (on another task queue) still answers."""

from __future__ import annotations

import time
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus

from keel.activities.store.run_store import Store
from keel.api.core.run_orders import session_workflow_id
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, Turn
from tests.integration.keel_http import ALICE, MakeSettings, StartLLM, keel_api, run_reaches
from tests.integration.test_sessions import new_session, post


async def test_a_message_to_a_session_of_another_task_queue_is_answered_here(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(Script(turns=[Turn(content="First answer."), Turn(content="Second answer.")]))
    before = settings_for(llm, workspace, api_port=free_port())
    async with keel_api(temporal_client, store, before, headers=ALICE) as http:
        session = await new_session(http, workspace)
        first = await post(http, session, "One?")
        assert first.status_code == 202, first.text
        await run_reaches(http, first.json()["run"]["id"], "completed")
    stale = temporal_client.get_workflow_handle(session_workflow_id(session))
    described = await stale.describe()
    assert described.task_queue == before.task_queue

    # Another Keel (its own task queue, as each test's stack and a changed KEEL_TASK_QUEUE
    # have): no worker polls the queue the session's workflow waits on.
    after = settings_for(llm, workspace, api_port=free_port())
    assert after.task_queue != before.task_queue
    async with keel_api(temporal_client, store, after, headers=ALICE) as http:
        sent = time.monotonic()
        second = await post(http, session, "Two?", on_busy="enqueue")
        assert second.status_code == 202, second.text
        assert time.monotonic() - sent < 10, "the message waited for a worker that is gone"
        run = await run_reaches(http, second.json()["run"]["id"], "completed")
        assert run["report"] == "Second answer.", "the run sees the session's history"
        now = await stale.describe()
        assert now.task_queue == after.task_queue
        assert now.status == WorkflowExecutionStatus.RUNNING
        old = temporal_client.get_workflow_handle(stale.id, run_id=described.run_id)
        assert (await old.describe()).status == WorkflowExecutionStatus.TERMINATED
        # Terminating a workflow on Postgres's word is on record: who, which session, where.
        async with store.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT tenant_id, actor, detail FROM audit_log"
                " WHERE action = 'session.moved' AND subject = %s",
                (session,),
            )
            moved = await cur.fetchall()
        assert len(moved) == 1, moved
        [row] = moved
        assert (row["tenant_id"], row["actor"]) == ("default", "system")
        detail = row["detail"]
        assert detail["from_task_queue"] == before.task_queue
        assert detail["to_task_queue"] == after.task_queue
        assert detail["terminated_workflow_run_id"] == described.run_id
