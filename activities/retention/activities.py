"""The `purge_expired_runs` activity: one retention batch, for every tenant with a policy."""

from __future__ import annotations

import logging

from temporalio import activity

from keel.activities.store.retention_store import RetentionStore
from keel.workflows.activity_refs import RetentionPurges
from keel.workflows.retention.models import PurgeBatchInput, PurgeBatchResult

log = logging.getLogger("keel.retention")


class RetentionActivities(RetentionPurges):
    """Batches through `RetentionStore`; each tenant's batch commits with its audit entry."""

    def __init__(self, store: RetentionStore) -> None:
        self._store = store

    @activity.defn(name="purge_expired_runs")
    async def purge_expired_runs(self, batch: PurgeBatchInput) -> PurgeBatchResult:
        # A retried batch finds the runs already purged and takes the next ones.
        purged = await self._store.purge_batch(batch.now, batch.batch_size)
        for tenant in purged:
            log.info(
                "retention: emptied %d runs, %d texts and %d eval results of tenant %s",
                len(tenant.runs),
                tenant.texts,
                tenant.evals,
                tenant.tenant_id,
            )
        return PurgeBatchResult(
            runs=sum(len(t.runs) for t in purged),
            texts=sum(t.texts for t in purged),
            tenants=[t.tenant_id for t in purged],
            more=any(
                max(len(t.runs), t.texts, t.evals, t.rows.get("memories", 0)) >= batch.batch_size
                for t in purged
            ),
        )
