"""`run_activity`: every activity call of the workflows, local or regular, in one place.

A call names a reference (`workflows.activity_refs`), its one input model and a
named options bundle (`workflows.timeouts`); whether it runs in the worker that
holds the workflow (local: one marker, no round trip through the server) or as a
regular activity (recorded before the workflow goes on) is the caller's choice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from keel.workflows.timeouts import LOCAL_RETRY_THRESHOLD, ActivityOptions

ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")

# A summary is in every step's history: enough to name the step, no more.
SUMMARY_CHARS = 48


async def run_activity(
    activity: Callable[[Any, ArgT], Awaitable[ResultT]],
    arg: ArgT,
    options: ActivityOptions,
    *,
    local: bool = False,
    summary: str | None = None,
) -> ResultT:
    """Run `activity` (a method of a reference protocol) with `arg` and `options`.

    A local activity has no heartbeat (it runs in this worker); it retries in the
    worker for `LOCAL_RETRY_THRESHOLD`, then by durable timer. `summary` names the
    step in the Temporal UI (`read_file src/app.py`); it lands in the history, so it
    is cut to `SUMMARY_CHARS`.
    """
    if summary is not None:
        summary = _short(summary)
    if local:
        return await workflow.execute_local_activity_method(
            activity,
            arg,
            start_to_close_timeout=options.start_to_close,
            schedule_to_close_timeout=options.schedule_to_close,
            retry_policy=options.retry,
            local_retry_threshold=LOCAL_RETRY_THRESHOLD,
            summary=summary,
        )
    return await workflow.execute_activity_method(
        activity,
        arg,
        start_to_close_timeout=options.start_to_close,
        schedule_to_close_timeout=options.schedule_to_close,
        heartbeat_timeout=options.heartbeat,
        retry_policy=options.retry,
        summary=summary,
    )


def _short(summary: str) -> str:
    line = " ".join(summary.split())
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1] + "…"
