"""Activities that open and close a run's record in Postgres."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from keel.activities.store.run_store import Store
from keel.activities.store.run_texts import MissingRunTexts
from keel.workflows.activity_refs import RunRecords
from keel.workflows.run.models import FinishRunInput, FinishRunResult, StartRunInput

REPORT_PREVIEW_CHARS = 200
TERMINAL_EVENT = {"completed": "done", "failed": "error", "cancelled": "cancelled"}


async def open_run(store: Store, start: StartRunInput) -> None:
    """Record the run as running with its opening messages (`start_run`, or a first call)."""
    try:
        await store.start_run(start)
    except MissingRunTexts as err:
        # Written before the run started, so waiting will not bring them.
        raise ApplicationError(str(err), type="MissingRunTexts", non_retryable=True) from err


class RunRecordActivities(RunRecords):
    """`start_run` and `finish_run`, idempotent on the run id and event seq."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @activity.defn(name="start_run")
    async def start_run(self, start: StartRunInput) -> None:
        await open_run(self._store, start)

    @activity.defn(name="finish_run")
    async def finish_run(self, finish: FinishRunInput) -> FinishRunResult:
        report = await self._store.finish_run(
            run_id=finish.run_id,
            status=finish.status,
            stop_reason=finish.stop_reason,
            error=finish.error,
            final_step=finish.final_step,
            steps=finish.steps,
            tool_calls=finish.tool_calls,
            event_seq=finish.event_seq,
            event_type=TERMINAL_EVENT.get(finish.status, "done"),
        )
        return FinishRunResult(
            report_preview=report[:REPORT_PREVIEW_CHARS] if finish.preview else ""
        )
