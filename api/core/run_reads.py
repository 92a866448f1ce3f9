"""Reading a run as its caller may see it: the tenancy check and the live state.

The REST routers and the MCP tools share these, so a run answers the same way
whichever door the caller came through.
"""

from __future__ import annotations

from datetime import timedelta

from fastapi import HTTPException
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from activities.store.records import RunRecord
from activities.store.run_store import Store
from api.core.audit_trail import ApiAudit
from api.core.schemas import RunPublic
from api.identity.auth import Principal
from workflows.agent_run import AgentRunWorkflow
from workflows.models import RunProgress

CLOSED_ELSEWHERE = {
    WorkflowExecutionStatus.TERMINATED: "failed",
    WorkflowExecutionStatus.TIMED_OUT: "failed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
}
# A query needs a worker; without one, answer from Postgres rather than hang.
PROGRESS_TIMEOUT = timedelta(seconds=3)


async def run_for(
    run_id: str, user: Principal, store: Store, audit: ApiAudit, *, allow_admin: bool = True
) -> RunRecord:
    """The run, if the caller's tenant owns it (admins may read any); 404 otherwise, audited."""
    record = await store.get_run(run_id)
    if record is None:
        raise HTTPException(404, detail=f"No run {run_id}.")
    if record.tenant_id != user.tenant_id and not (allow_admin and user.is_admin):
        await audit.cross_tenant(user, "run", run_id)
        raise HTTPException(404, detail=f"No run {run_id}.")
    return record


async def live_run(record: RunRecord, temporal: Client) -> RunPublic:
    """The run as clients see it; a live run's progress comes from the workflow itself."""
    public = RunPublic.from_record(record)
    if record.status in ("queued", "running"):
        await _overlay_live_state(public, temporal)
    return public


async def _overlay_live_state(public: RunPublic, temporal: Client) -> None:
    handle = temporal.get_workflow_handle(public.id)
    try:
        description = await handle.describe()
        wf_status = description.status
        closed_as = CLOSED_ELSEWHERE.get(wf_status) if wf_status is not None else None
        if wf_status is not None and closed_as is not None:
            public.status = closed_as
            public.error = public.error or f"The workflow was {wf_status.name.lower()}."
            return
        progress: RunProgress = await handle.query(
            AgentRunWorkflow.progress, rpc_timeout=PROGRESS_TIMEOUT
        )
    except RPCError:
        return
    if progress.status == "running":
        public.status = "running"
    public.pending_interactions = progress.pending_interactions
    public.steps = max(public.steps, progress.step)
    public.tool_calls = max(public.tool_calls, progress.tool_calls)
