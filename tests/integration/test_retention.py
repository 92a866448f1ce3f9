"""Retention: a sweep on the Temporal Schedule empties what is older than the tenant's
policy and nothing newer, nothing of a tenant without one, and the audit log verifies."""

from __future__ import annotations

import contextlib
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleSpec,
)

from keel.activities.store.retention_store import RUN_CONTENT_TABLES, RetentionStore
from keel.activities.store.run_store import Store
from keel.api.core.retention import RETENTION_SCHEDULE_ID
from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from keel.workflows.retention.models import RetentionSweep, RetentionSweepResult
from keel.workflows.retention.workflow import RetentionWorkflow
from tests.conftest import auth_headers, token_for
from tests.integration.keel_http import LaunchKeel, base_url, eventually, pending, run_reaches
from tests.integration.test_approvals import write
from tests.integration.test_cli import clean_env, keel

ADMIN_TOKEN = token_for("ops", "root", "keel:admin")
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


async def approved_run(http: httpx.AsyncClient, workspace: Path, tenant: str, task: str) -> str:
    """A finished `build` run of `tenant` with a model call, a read, and an approved write."""
    headers = auth_headers(tenant, "alice")
    body = {"agent": "build", "input": task, "workspace": str(workspace)}
    created = await http.post("/v1/runs", headers=headers, json=body)
    assert created.status_code == 201, created.text
    run_id = str(created.json()["id"])
    [ia] = await pending(http, run_id, headers=headers)
    decided = await http.post(
        f"/v1/runs/{run_id}/interactions/{ia['id']}",
        headers=headers,
        json={"decision": "approve", "payload_hash": ia["payload_hash"]},
    )
    assert decided.status_code == 200
    await run_reaches(http, run_id, "completed", headers=headers)
    return run_id


async def contents(store: Store, run_id: str) -> dict[str, Any]:
    """How many rows of each content table a run has, and its row's texts."""
    counts: dict[str, Any] = {}
    async with store.pool.connection() as conn:
        for table in RUN_CONTENT_TABLES:
            cur = await conn.execute(
                f"SELECT count(*) AS n FROM {table} WHERE run_id = %s", (run_id,)
            )
            row = await cur.fetchone()
            assert row is not None
            counts[table] = row["n"]
        cur = await conn.execute(
            "SELECT input, report, purged_at, status FROM runs WHERE id = %s", (run_id,)
        )
        counts["run"] = await cur.fetchone()
    return counts


async def age(store: Store, run_id: str, tenant: str, task: str, days: int) -> None:
    """Make a run (and its stored texts) look `days` days old."""
    async with store.pool.connection() as conn:
        await conn.execute(
            "UPDATE runs SET created_at = created_at - make_interval(days => %s),"
            " finished_at = finished_at - make_interval(days => %s) WHERE id = %s",
            (days, days, run_id),
        )
        await conn.execute(
            "UPDATE run_texts SET created_at = created_at - make_interval(days => %s)"
            " WHERE tenant_id = %s AND input = %s",
            (days, tenant, task),
        )


async def texts_of(store: Store, tenant: str, task: str) -> int:
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) AS n FROM run_texts WHERE tenant_id = %s AND input = %s",
            (tenant, task),
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row["n"])


async def swept(client: Client, before: set[str]) -> RetentionSweepResult:
    """The result of the sweep the schedule started after `before`."""
    schedule = client.get_schedule_handle(RETENTION_SCHEDULE_ID)

    async def started() -> str | None:
        actions = (await schedule.describe()).info.recent_actions
        new = [
            a.action.workflow_id
            for a in actions
            if isinstance(a.action, ScheduleActionExecutionStartWorkflow)
            and a.action.workflow_id not in before
        ]
        return new[-1] if new else None

    sweep_id = await eventually(started, "a sweep the retention schedule started", within=30)
    return await client.get_workflow_handle_for(RetentionWorkflow.run, sweep_id).result()


async def stale_schedule(client: Client) -> None:
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(
            RetentionWorkflow.run, RetentionSweep(), id="stale-sweep", task_queue="nobody-polls"
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(days=1))]),
    )
    with contextlib.suppress(ScheduleAlreadyRunningError):
        await client.create_schedule(RETENTION_SCHEDULE_ID, schedule)


async def test_a_sweep_removes_what_is_older_than_the_policy_and_nothing_newer(
    temporal_client: Client, store: Store, workspace: Path, keel_app: LaunchKeel
) -> None:
    script = Script(
        turns=[
            Turn(
                tool_calls=[
                    ScriptedToolCall(name="read_file", arguments={"path": "pkg/core.py"}),
                    write("notes.txt", "reviewed"),
                ]
            ),
            Turn(content="All reviewed."),
        ]
    )
    kept, other = f"ret-{uuid.uuid4().hex[:8]}", f"ret-other-{uuid.uuid4().hex[:8]}"
    async with keel_app(script, headers={}) as http:
        old = await approved_run(http, workspace, kept, "Old task.")
        new = await approved_run(http, workspace, kept, "New task.")
        other_old = await approved_run(http, workspace, other, "Old task.")
        await age(store, old, kept, "Old task.", days=40)
        await age(store, other_old, other, "Old task.", days=40)
        before_new = await contents(store, new)
        before_other = await contents(store, other_old)
        assert all(before_new[t] > 0 for t in ("messages", "events", "llm_calls", "interactions"))

        # A schedule left pointing at a queue no worker polls (an older deployment's)
        # is brought to this Keel's settings when a policy is set.
        await stale_schedule(temporal_client)
        # Admins set the policy, through the CLI and the API; others may not.
        env = clean_env(KEEL_API_URL=base_url(http), KEEL_TOKEN=ADMIN_TOKEN)
        code, out = await keel("retention", "set", "30", "--tenant", kept, env=env)
        assert code == 0, out
        refused = await http.put(
            f"/v1/admin/retention/tenants/{kept}",
            headers=auth_headers(kept, "alice"),
            json={"days": 1},
        )
        assert refused.status_code == 403
        policy = (await http.get(f"/v1/admin/retention/tenants/{kept}", headers=ADMIN)).json()
        assert policy["days"] == 30 and policy["updated_by"] == "user:root"
        missing = await http.get(f"/v1/admin/retention/tenants/{other}", headers=ADMIN)
        assert missing.status_code == 404

        schedule = temporal_client.get_schedule_handle(RETENTION_SCHEDULE_ID)
        earlier = {
            a.action.workflow_id
            for a in (await schedule.describe()).info.recent_actions
            if isinstance(a.action, ScheduleActionExecutionStartWorkflow)
        }
        sweep = await http.post("/v1/admin/retention/sweeps", headers=ADMIN)
        assert sweep.status_code == 202
        result = await swept(temporal_client, earlier)
        assert result.runs_purged == 1

        gone = await contents(store, old)
        assert all(gone[t] == 0 for t in RUN_CONTENT_TABLES), gone
        assert gone["run"]["purged_at"] is not None and gone["run"]["report"] is None
        assert gone["run"]["input"] == "" and gone["run"]["status"] == "completed"
        assert await texts_of(store, kept, "Old task.") == 0
        # The run is still there for its owner, emptied.
        shown = await http.get(f"/v1/runs/{old}", headers=auth_headers(kept, "alice"))
        assert shown.status_code == 200 and shown.json()["status"] == "completed"
        # Nothing newer, and nothing of a tenant without a policy.
        assert await contents(store, new) == before_new
        assert await contents(store, other_old) == before_other
        assert await texts_of(store, kept, "New task.") == 1
        assert await texts_of(store, other, "Old task.") == 1

        # The audit log says what went, and the tenant's chain still verifies (only its
        # own: tests of tampering leave edited rows in other chains of this database).
        code, out = await keel("audit", "verify", "--tenant", kept, env=env)
        assert code == 0, out
        rows = await http.get(
            "/v1/admin/audit", headers=ADMIN, params={"tenant": kept, "limit": 1000}
        )
        [purged] = [r for r in rows.json() if r["action"] == "retention.purged"]
        assert purged["detail"]["runs"] == [old]
        assert purged["detail"]["rows"]["messages"] == before_new["messages"]
        policy = (await http.get(f"/v1/admin/retention/tenants/{kept}", headers=ADMIN)).json()
        assert policy["runs_purged"] == 1
        assert policy["removed_head"] == purged["detail"]["removed_head"]
        assert policy["last_audit_hash"] == purged["hash"]
        # A second batch finds nothing left to remove.
        assert await RetentionStore(store.pool).purge_batch(gone["run"]["purged_at"], 200) == []

        code, out = await keel("retention", "clear", "--tenant", kept, env=env)
        assert code == 0, out
        await schedule.delete()  # the session's Temporal server is shared with other tests
