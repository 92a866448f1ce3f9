"""/v1/runs: start runs, read them and their events."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from activities.records import RunRecord
from api.audit_trail import ApiAudit
from api.auth import Principal
from api.deps import (
    AuditDep,
    CatalogDep,
    CurrentUser,
    SessionStoreDep,
    SettingsDep,
    StoreDep,
    TemporalDep,
)
from api.errors import AUTHENTICATED, documented, problem
from api.identity import user_ref
from api.page_cursor import decode_cursor, encode_cursor
from api.run_factory import (
    find_agent,
    new_run_id,
    record_and_start,
    resolve_workspace,
    run_input,
    session_workflow_id,
    submit_to_session,
)
from api.schemas import RunCreate, RunList, RunPublic, StoredText
from workflows.agent_run import AgentRunWorkflow
from workflows.models import RunProgress, WithdrawOutcome
from workflows.session import SessionWorkflow

router = APIRouter(prefix="/v1/runs", tags=["runs"], responses=AUTHENTICATED)

CLOSED_ELSEWHERE = {
    WorkflowExecutionStatus.TERMINATED: "failed",
    WorkflowExecutionStatus.TIMED_OUT: "failed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
}


async def run_for(
    run_id: str, user: Principal, store: StoreDep, audit: ApiAudit, *, allow_admin: bool = True
) -> RunRecord:
    """The run, if the caller's tenant owns it (admins may read any); 404 otherwise, audited."""
    record = await store.get_run(run_id)
    if record is None:
        raise HTTPException(404, detail=f"No run {run_id}.")
    if record.tenant_id != user.tenant_id and not (allow_admin and user.is_admin):
        await audit.cross_tenant(user, "run", run_id)
        raise HTTPException(404, detail=f"No run {run_id}.")
    return record


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=RunPublic,
    responses=documented(409),
)
async def create_run(
    body: RunCreate,
    user: CurrentUser,
    temporal: TemporalDep,
    store: StoreDep,
    sessions: SessionStoreDep,
    settings: SettingsDep,
    catalog: CatalogDep,
    audit: AuditDep,
) -> RunPublic:
    """Start a run; with `session_id`, the run joins that session (created if new)."""
    agent = find_agent(catalog, body.agent)
    workspace = resolve_workspace(body.workspace, settings.workspace_root)
    run_id = new_run_id(body.run_id)
    existing = await store.get_run(run_id)
    if existing is not None:
        if existing.tenant_id != user.tenant_id:
            await audit.cross_tenant(user, "run", run_id)
            raise problem(409, "run_id", "That run id is taken; choose another.")
        return RunPublic.from_record(existing)
    run = run_input(
        run_id=run_id,
        agent=agent,
        text=body.input,
        model=body.model or agent.model or settings.model,
        workspace=workspace,
        user=user,
        trigger=body.trigger,
        settings=settings,
        session_id=body.session_id,
        approver=body.approver,
        approval_expires_after_s=body.approval_expires_after_s,
        webhook_url=body.webhook_url,
    )
    if body.session_id is None:
        await record_and_start(
            temporal=temporal,
            store=store,
            settings=settings,
            user=user,
            run=run,
            metadata=body.metadata,
        )
    else:
        session = await sessions.create(
            session_id=body.session_id,
            tenant_id=user.tenant_id,
            agent=agent.name,
            workspace=str(workspace),
            model=body.model,
            approver=body.approver,
            created_by=user_ref(user),
            metadata={},
        )
        if session.tenant_id != user.tenant_id:
            await audit.cross_tenant(user, "session", body.session_id)
            raise problem(409, "session_id", "That session id is taken; choose another.")
        await submit_to_session(
            temporal=temporal,
            store=store,
            settings=settings,
            user=user,
            run=run,
            on_busy=body.on_busy,
            metadata=body.metadata,
        )
    record = await store.get_run(run_id)
    assert record is not None
    return RunPublic.from_record(record)


@router.post("/{run_id}/cancel", response_model=RunPublic, responses=documented(404, 409))
async def cancel_run(
    run_id: StoredText, user: CurrentUser, store: StoreDep, temporal: TemporalDep, audit: AuditDep
) -> RunPublic:
    """Cancel a run: a queued one leaves its session's queue, a live one is cancelled."""
    record = await run_for(run_id, user, store, audit, allow_admin=False)
    if record.status in ("completed", "failed", "cancelled"):
        raise HTTPException(409, detail=f"Run {run_id} has already {record.status}.")
    if record.status == "queued" and record.session_id is not None:
        session = temporal.get_workflow_handle_for(
            SessionWorkflow.run, session_workflow_id(record.session_id)
        )
        try:
            outcome: WithdrawOutcome = await session.execute_update(
                "withdraw", run_id, result_type=WithdrawOutcome
            )
        except RPCError:
            outcome = WithdrawOutcome(run_id=run_id, was="unknown")  # no session workflow
        if outcome.was != "unknown":
            return RunPublic.from_record(await _reloaded(store, run_id))
    try:
        await temporal.get_workflow_handle(run_id).cancel()
    except RPCError as err:
        raise HTTPException(409, detail=f"Run {run_id} can no longer be cancelled.") from err
    public = RunPublic.from_record(await _reloaded(store, run_id))
    public.status = "cancelling" if public.status not in ("cancelled",) else public.status
    return public


async def _reloaded(store: StoreDep, run_id: str) -> RunRecord:
    record = await store.get_run(run_id)
    assert record is not None
    return record


@router.get("", response_model=RunList)
async def list_runs(
    store: StoreDep,
    user: CurrentUser,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    status_: Annotated[StoredText | None, Query(alias="status", max_length=32)] = None,
    agent: Annotated[StoredText | None, Query(max_length=64)] = None,
) -> RunList:
    before = decode_cursor(cursor) if cursor else None
    runs = await store.list_runs(
        tenant_id=user.tenant_id, limit=limit, before=before, status=status_, agent=agent
    )
    next_cursor = encode_cursor(runs[-1].created_at, runs[-1].id) if len(runs) == limit else None
    return RunList(runs=[RunPublic.from_record(r) for r in runs], next_cursor=next_cursor)


@router.get("/{run_id}", response_model=RunPublic, responses=documented(404))
async def get_run(
    run_id: StoredText, user: CurrentUser, store: StoreDep, temporal: TemporalDep, audit: AuditDep
) -> RunPublic:
    record = await run_for(run_id, user, store, audit)
    public = RunPublic.from_record(record)
    if record.status in ("queued", "running"):
        await _overlay_live_state(public, temporal)
    return public


async def _overlay_live_state(public: RunPublic, temporal: TemporalDep) -> None:
    """A live run's progress comes from the workflow itself."""
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
            AgentRunWorkflow.progress, rpc_timeout=timedelta(seconds=3)
        )
    except RPCError:
        return
    if progress.status == "running":
        public.status = "running"
    public.pending_interactions = progress.pending_interactions
    public.steps = max(public.steps, progress.step)
    public.tool_calls = max(public.tool_calls, progress.tool_calls)
