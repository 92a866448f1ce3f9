"""A read of one's own run in the moment before it is recorded, when another tenant holds
its id (two schedules of one id fired in the same second), is no cross-tenant read."""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.client import Client

from keel.activities.store.audit import AuditLog
from keel.activities.store.run_store import Store
from keel.worker.scripted.llm import Script, Turn
from keel.workflows.tenant_keys import scoped
from tests.conftest import auth_headers
from tests.integration.keel_http import LaunchKeel


async def test_ones_own_run_not_yet_recorded_is_not_another_tenants(
    temporal_client: Client, store: Store, workspace: Path, keel_app: LaunchKeel
) -> None:
    script = Script(turns=[Turn(content="Done."), Turn(content="Done too.")])
    first, second = f"holder-{uuid.uuid4().hex[:8]}", f"newcomer-{uuid.uuid4().hex[:8]}"
    holder, newcomer = auth_headers(first, "alice"), auth_headers(second, "bob")
    shared, other = f"run-twin-{uuid.uuid4().hex[:8]}", f"run-else-{uuid.uuid4().hex[:8]}"
    async with keel_app(script, headers={}) as http:
        for run_id in (shared, other):
            body = {"agent": "review", "input": "Look.", "workspace": str(workspace)}
            created = await http.post("/v1/runs", headers=holder, json={**body, "run_id": run_id})
            assert created.status_code == 201, created.text
        # The newcomer's run of that id has a workflow (under its scoped key) but no record
        # yet: nothing polls its queue, so it stays in the moment before its first activity.
        starting = await temporal_client.start_workflow(
            "AgentRunWorkflow",
            "never read",
            id=scoped(second, shared),
            task_queue=f"nobody-polls-{uuid.uuid4().hex[:8]}",
        )
        try:
            answer = await http.get(f"/v1/runs/{shared}", headers=newcomer)
            assert answer.status_code == 404, answer.text
            assert answer.json()["detail"] == f"Run {shared} is starting; ask again in a moment."
            probe = await http.get(f"/v1/runs/{other}", headers=newcomer)
            assert probe.status_code == 404 and probe.json()["detail"] == f"No run {other}."
            mine = await http.get(f"/v1/runs/{shared}", headers=holder)
            assert mine.status_code == 200 and mine.json()["id"] == shared
        finally:
            await starting.terminate("test over")
    refused = [
        (e.action, e.subject)
        for e in await AuditLog(store.pool).entries(second)
        if e.category == "tenancy"
    ]
    assert refused == [("run.cross_tenant_denied", other)], "only the probe is audited"
