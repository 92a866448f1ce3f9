"""`RetentionWorkflow`: a Temporal Schedule's sweep that empties runs past their tenant's
retention, a batch at a time, until none is left.

Each batch is one activity (one transaction per tenant that removes the rows and
audits what went), so a sweep interrupted anywhere resumes where it was and never
holds a long transaction. A large backlog continues-as-new before its history grows.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import RetentionPurges
    from keel.workflows.retention.models import (
        PurgeBatchInput,
        RetentionSweep,
        RetentionSweepResult,
    )

# Batches per workflow run before it continues as new: a few events each.
BATCHES_PER_RUN = 500


@workflow.defn(name="RetentionWorkflow")
class RetentionWorkflow:
    @workflow.run
    async def run(self, sweep: RetentionSweep) -> RetentionSweepResult:
        now = sweep.started_at or workflow.now()
        purged = sweep.runs_purged
        for batch in range(1, BATCHES_PER_RUN + 1):
            result = await run_activity(
                RetentionPurges.purge_expired_runs,
                PurgeBatchInput(now=now, batch_size=sweep.batch_size),
                timeouts.RETENTION_BATCH,
                summary=f"purge batch {batch}",
            )
            purged += result.runs
            if not result.more:
                return RetentionSweepResult(runs_purged=purged, batches=batch)
        workflow.continue_as_new(
            sweep.model_copy(update={"runs_purged": purged, "started_at": now})
        )
