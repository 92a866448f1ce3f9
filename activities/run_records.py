"""Activities that open and close a run's record in Postgres."""

from __future__ import annotations

from temporalio import activity

from activities.store import Store
from workflows.models import FinishRunInput, FinishRunResult, StartRunInput

REPORT_PREVIEW_CHARS = 200
TERMINAL_EVENT = {"completed": "done", "failed": "error", "cancelled": "cancelled"}


class RunRecordActivities:
    """`start_run` and `finish_run`, idempotent on the run id and event seq."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @activity.defn(name="start_run")
    async def start_run(self, start: StartRunInput) -> None:
        await self._store.start_run(start)

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
        return FinishRunResult(report_preview=report[:REPORT_PREVIEW_CHARS])
