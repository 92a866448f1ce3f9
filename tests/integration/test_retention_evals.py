"""Retention empties a tenant's eval results with its runs: older than the policy go."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from keel.activities.store.audit import AuditLog
from keel.activities.store.eval_store import EvalRow, EvalStore
from keel.activities.store.retention_store import RetentionStore
from keel.activities.store.run_store import Store


def result(tenant: str, eval_id: str, when: datetime) -> EvalRow:
    return EvalRow(
        tenant_id=tenant,
        id=eval_id,
        requester="user:alice",
        recorded_at=when,
        started_at=when,
        finished_at=when,
        repeat=1,
        scenarios=1,
        passed=1,
        report_sha256="0" * 64,
        report='{"scenarios": [{"input": "the task", "answer": "the answer"}]}',
    )


async def test_a_sweep_removes_old_eval_results_of_a_tenant_with_a_policy(store: Store) -> None:
    tenant, other = f"evals-{uuid.uuid4().hex[:8]}", f"no-policy-{uuid.uuid4().hex[:8]}"
    retention, evals = RetentionStore(store.pool), EvalStore(store.pool)
    await retention.set_policy(tenant, 30, "user:root")
    now = datetime.now(UTC)
    for owner in (tenant, other):
        for eval_id in ("ev-old", "ev-new"):
            await evals.put(result(owner, eval_id, now))
        async with store.pool.connection() as conn:
            await conn.execute(
                "UPDATE eval_results SET recorded_at = recorded_at - interval '40 days'"
                " WHERE tenant_id = %s AND id = 'ev-old'",
                (owner,),
            )

    batches = [
        b
        for b in await retention.purge_batch(datetime.now(UTC), 200)
        if b.tenant_id in (tenant, other)
    ]
    assert [(b.tenant_id, b.runs, b.evals) for b in batches] == [(tenant, [], 1)]
    assert await evals.get(tenant, "ev-old") is None
    assert await evals.get(tenant, "ev-new") is not None, "newer than the policy: kept"
    assert await evals.get(other, "ev-old") is not None, "a tenant without a policy keeps all"
    again = await retention.purge_batch(datetime.now(UTC), 200)
    assert not [b for b in again if b.tenant_id == tenant], "nothing is left to remove"

    audit = AuditLog(store.pool)
    [purged] = [e for e in await audit.entries(tenant) if e.action == "retention.purged"]
    assert purged.detail["evals"] == 1 and purged.detail["runs"] == []
    assert (await audit.verify(tenant)).ok
