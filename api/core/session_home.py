"""A session's workflow runs on this Keel's task queue, or a message to it would wait for
nobody.

A session workflow lives as long as its conversation, on the task queue it was first
started on. When that is not the queue this Keel's workers poll (KEEL_TASK_QUEUE was
changed, or another Keel on the same Temporal namespace started it, as each test's
stack does), no worker of ours would ever run the update that hands it a message: the
sender would wait SUBMIT_WAIT and hear 503, and again on every retry. An idle session
holds nothing but its id (its rules and history are in Postgres), so such a workflow is
closed and the session starts again on our queue (audited: a workflow was terminated on
Postgres's word); one with a run in flight is left to the workers that run it.
"""

from __future__ import annotations

import logging
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from keel.activities.store.audit import AuditEntry
from keel.api.core.context import TEMPORAL_CALL_TIMEOUT, CoreParts

__all__ = ["on_our_queue"]

log = logging.getLogger("keel.api.sessions")


async def on_our_queue(
    parts: CoreParts,
    handle: WorkflowHandle[Any, Any],
    session_id: str,
    run_id: str,
    *,
    tenant_id: str,
) -> bool:
    """Whether the session workflow behind `handle` is served by our task queue; an idle
    one on another queue is terminated (then False: start it again and use the new one).
    `run_id` is the run being submitted, which does not make the session busy."""
    ours = parts.settings.task_queue
    try:
        description = await handle.describe(rpc_timeout=TEMPORAL_CALL_TIMEOUT)
    except RPCError:
        return True  # the submit itself says what is wrong
    if description.task_queue == ours or description.close_time is not None:
        return True
    busy = await parts.store.session_busy(session_id, besides=run_id)
    if busy is not None:
        return True  # its workers run `busy`; they are the ones to take the message
    log.warning(
        "session %s: its workflow runs on task queue %s, not %s; starting it again here",
        session_id,
        description.task_queue,
        ours,
    )
    # That very execution: a twin message may have started the session here meanwhile.
    stale = parts.temporal.get_workflow_handle(handle.id, run_id=description.run_id)
    try:
        await stale.terminate(
            reason=f"Session moved to task queue {ours}.", rpc_timeout=TEMPORAL_CALL_TIMEOUT
        )
    except RPCError:
        return False  # a concurrent message moved it already, or it closed meanwhile
    await parts.audit.log.append(
        AuditEntry(
            tenant_id=tenant_id,
            actor="system",
            category="session",
            action="session.moved",
            severity="warning",
            subject=session_id,
            detail={
                "from_task_queue": description.task_queue,
                "to_task_queue": ours,
                "terminated_workflow_run_id": description.run_id,
            },
        )
    )
    return False
