"""A run as clients see it while it lives: the workflow's own progress laid over what
Postgres has recorded, and what the run's tree waits on now.

Reads never wait for the step in flight: a workflow with a task running is not asked,
and one that does not answer at once leaves Postgres to answer. `RunService` composes
`RunLiveState`; every surface reads a run through the service.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.api.enums.v1 import PendingWorkflowTaskState
from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError

from keel.activities.store.records import RunRecord
from keel.api.core.context import CoreParts
from keel.api.core.run_tree import subtree, tree_interactions, tree_usage, with_tree
from keel.api.core.schemas.interactions import InteractionPublic
from keel.api.core.schemas.runs import RunPublic
from keel.api.core.tenant_ids import in_view
from keel.workflows.interactions.models import Interaction
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.models import RunProgress

__all__ = ["LIVE_QUERY_TIMEOUT", "PROGRESS_TIMEOUT", "RunLiveState", "workflow_busy"]

CLOSED_ELSEWHERE = {
    WorkflowExecutionStatus.TERMINATED: "failed",
    WorkflowExecutionStatus.TIMED_OUT: "failed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
}
# A query needs a worker; without one, answer from Postgres rather than hang.
PROGRESS_TIMEOUT = timedelta(seconds=3)
# A query is answered between workflow tasks, so it waits behind the step in flight (a
# chain of local activities holds one task for up to ~2 s). A read asks only a workflow
# with no task running, and waits this long at most; otherwise it answers from what the
# run has recorded in Postgres.
LIVE_QUERY_TIMEOUT = timedelta(milliseconds=75)


def workflow_busy(description: WorkflowExecutionDescription) -> bool:
    """Whether a workflow task is running now, so a query would wait for it to end."""
    task = description.raw_description.pending_workflow_task
    return task.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED


class RunLiveState:
    """A live run's state and pending interactions, from its workflow and Postgres."""

    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts

    async def live(self, record: RunRecord) -> RunPublic:
        """The run as clients see it, with its tree of sub-agent runs; a live run's
        progress comes from the workflow itself. A live run that waits on a person (it or
        a sub-agent has a pending interaction) reads as `waiting`.

        Never waits for the step in flight: a busy workflow's progress is what Postgres
        has (steps so far, pending interactions).
        """
        public = RunPublic.from_record(record)
        if record.status in ("queued", "running"):
            await self._overlay_live_state(public, record.id)
            waiting = await self._pending_in(record, public.pending_interactions)
            public.pending_interactions = [i.id for i in waiting]
            # The row was read before the interactions: a run that has taken a step or
            # waits on someone has started, whatever that earlier read said.
            if public.status == "queued" and (public.pending_interactions or public.steps):
                public.status = "running"
            if public.status == "running" and public.pending_interactions:
                public.status = "waiting"
        store = self._parts.store
        return with_tree(public, await subtree(store, record), await tree_usage(store, record))

    async def pending(self, record: RunRecord) -> list[InteractionPublic]:
        """What the run's tree (the run and its sub-agents) waits on now, as the run's
        tenant sees it; nothing once the run has ended. Every surface asks this."""
        if record.status not in ("queued", "running"):
            return []
        public = RunPublic.from_record(record)
        await self._overlay_live_state(public, record.id)
        return await self._pending_in(record, public.pending_interactions)

    async def _pending_in(
        self, record: RunRecord, from_workflow: list[str]
    ) -> list[InteractionPublic]:
        """The tree's pending interactions, given those the run's workflow said it waits on.

        Postgres holds every interaction before any workflow shows it, and every decision
        before the workflow acts on it; a parent hears of its sub-agents' interactions
        only later. So Postgres says what is pending, the workflow adds what it has not
        stored yet. Ids are compared as the tenant sees them: the workflow knows the
        scoped keys.
        """
        tenant = record.tenant_id
        tree = await tree_interactions(self._parts.store, self._parts.interactions, record)
        stored = {i.id for i in tree}
        unstored = [
            shown
            for shown in dict.fromkeys(in_view(tenant, i) for i in from_workflow)
            if shown not in stored
        ]
        waiting = [i for i in tree if i.status == "pending"]
        if unstored:
            waiting += await self._unstored(record, unstored)
        return waiting

    async def _unstored(self, record: RunRecord, shown: list[str]) -> list[InteractionPublic]:
        """The run's own interactions named in `shown` that only its workflow knows yet
        (none when it cannot answer now: the next read finds them stored)."""
        handle = self._parts.temporal.get_workflow_handle_for(AgentRunWorkflow.run, record.id)
        try:
            every: list[Interaction] = await handle.query(
                AgentRunWorkflow.list_interactions, rpc_timeout=LIVE_QUERY_TIMEOUT
            )
        except RPCError:
            return []
        return [
            InteractionPublic.from_interaction(record.id, ia, tenant_id=record.tenant_id)
            for ia in every
            if in_view(record.tenant_id, ia.id) in shown
        ]

    async def _overlay_live_state(self, public: RunPublic, run_id: str) -> bool:
        """Put the workflow's own progress on `public`; False when Postgres must answer."""
        handle = self._parts.temporal.get_workflow_handle_for(AgentRunWorkflow.run, run_id)
        try:
            description = await handle.describe(rpc_timeout=PROGRESS_TIMEOUT)
            wf_status = description.status
            closed_as = CLOSED_ELSEWHERE.get(wf_status) if wf_status is not None else None
            if wf_status is not None and closed_as is not None:
                public.status = closed_as
                public.error = public.error or f"The workflow was {wf_status.name.lower()}."
                # Its end was never recorded: record it, and end what it waited on.
                await self._parts.store.end_closed_elsewhere(
                    run_id, status=closed_as, error=public.error
                )
                return True
            if workflow_busy(description):
                return False
            progress: RunProgress = await handle.query(
                AgentRunWorkflow.progress, rpc_timeout=LIVE_QUERY_TIMEOUT
            )
        except RPCError:
            return False
        if progress.status == "running":
            public.status = "running"
        public.pending_interactions = progress.pending_interactions
        public.steps = max(public.steps, progress.step)
        public.tool_calls = max(public.tool_calls, progress.tool_calls)
        return True
