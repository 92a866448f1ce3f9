"""The retention sweep's loop: batches until nothing is left, on one clock."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from temporalio import activity
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from keel.worker.temporal_client import DATA_CONVERTER
from keel.workflows.activity_refs import RetentionPurges
from keel.workflows.retention.models import PurgeBatchInput, PurgeBatchResult, RetentionSweep
from keel.workflows.retention.workflow import RetentionWorkflow

TEST_SERVER = Path(sys.executable).parent / "temporal-test-server"


class StandInPurges(RetentionPurges):
    """Three full batches, then a short one; records what each batch was given."""

    def __init__(self) -> None:
        self.batches: list[PurgeBatchInput] = []

    @activity.defn(name="purge_expired_runs")
    async def purge_expired_runs(self, batch: PurgeBatchInput) -> PurgeBatchResult:
        self.batches.append(batch)
        full = len(self.batches) <= 3
        runs = batch.batch_size if full else 2
        return PurgeBatchResult(runs=runs, tenants=["acme"], more=full)


async def test_the_sweep_takes_batches_until_none_is_full() -> None:
    purges = StandInPurges()
    queue = f"retention-{uuid.uuid4().hex[:8]}"
    async with (
        await WorkflowEnvironment.start_time_skipping(
            data_converter=DATA_CONVERTER, test_server_existing_path=str(TEST_SERVER)
        ) as env,
        Worker(
            env.client,
            task_queue=queue,
            workflows=[RetentionWorkflow],
            activities=[purges.purge_expired_runs],
        ),
    ):
        result = await env.client.execute_workflow(
            RetentionWorkflow.run,
            RetentionSweep(batch_size=5),
            id=f"sweep-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
        )
    assert result.runs_purged == 3 * 5 + 2
    assert result.batches == 4
    # Every batch measures its cutoffs from the sweep's start, not from its own time.
    assert len({b.now for b in purges.batches}) == 1
