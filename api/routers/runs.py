"""/v1/runs: start runs, read them and their events."""

from __future__ import annotations

import base64
import uuid
from datetime import datetime
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from activities.records import RunRecord
from api.audit_trail import ApiAudit
from api.auth import Principal
from api.deps import (
    AuditDep,
    CatalogDep,
    CurrentUser,
    SettingsDep,
    StoreDep,
    TemporalDep,
)
from api.identity import user_ref
from api.schemas import EventPage, EventPublic, RunCreate, RunList, RunPublic
from workflows.agent_run import AgentRunWorkflow
from workflows.models import RunInput, RunProgress

router = APIRouter(prefix="/v1/runs", tags=["runs"])

CLOSED_ELSEWHERE = {
    WorkflowExecutionStatus.TERMINATED: "failed",
    WorkflowExecutionStatus.TIMED_OUT: "failed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
}


async def run_for(run_id: str, user: Principal, store: StoreDep, audit: ApiAudit) -> RunRecord:
    """The run, if the caller's tenant owns it (admins see all); 404 otherwise, audited."""
    record = await store.get_run(run_id)
    if record is None:
        raise HTTPException(404, detail=f"No run {run_id}.")
    if record.tenant_id != user.tenant_id and not user.is_admin:
        await audit.cross_tenant(user, "run", run_id)
        raise HTTPException(404, detail=f"No run {run_id}.")
    return record


def _problem(code: int, field: str, message: str) -> HTTPException:
    return HTTPException(status_code=code, detail=[{"loc": ["body", field], "msg": message}])


def _resolve_workspace(raw: str, root: Path) -> Path:
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = root / path
    path = path.resolve()
    if not path.is_relative_to(root.resolve()):
        raise _problem(
            422,
            "workspace",
            f"Workspace {path} is outside the allowed root {root.resolve()}; "
            "choose a directory inside it or start Keel with KEEL_WORKSPACE_ROOT set.",
        )
    if not path.is_dir():
        raise _problem(422, "workspace", f"Workspace {path} is not an existing directory.")
    return path


@router.post("", status_code=status.HTTP_201_CREATED, response_model=RunPublic)
async def create_run(
    body: RunCreate,
    user: CurrentUser,
    temporal: TemporalDep,
    store: StoreDep,
    settings: SettingsDep,
    catalog: CatalogDep,
    audit: AuditDep,
) -> RunPublic:
    agent = catalog.get(body.agent)
    if agent is None:
        raise _problem(
            422,
            "agent",
            f"Unknown agent '{body.agent}'. Known agents: {', '.join(catalog.names())}.",
        )
    workspace = _resolve_workspace(body.workspace, settings.workspace_root)
    run_id = body.run_id or f"run-{uuid.uuid4().hex[:16]}"
    model = body.model or agent.model or settings.model
    existing = await store.get_run(run_id)
    if existing is not None:
        if existing.tenant_id != user.tenant_id:
            await audit.cross_tenant(user, "run", run_id)
            raise _problem(409, "run_id", "That run id is taken; choose another.")
        return RunPublic.from_record(existing)
    if body.session_id is not None:
        raise _problem(422, "session_id", "Sessions are not available yet; omit session_id.")
    requester = user_ref(user)
    await store.create_run(
        run_id=run_id,
        tenant_id=user.tenant_id,
        agent=agent.name,
        model=model,
        requester=requester,
        trigger=body.trigger,
        workspace=str(workspace),
        input=body.input,
        metadata=body.metadata,
    )
    try:
        await temporal.start_workflow(
            AgentRunWorkflow.run,
            RunInput(
                run_id=run_id,
                agent=agent,
                input=body.input,
                model=model,
                workspace=str(workspace),
                tenant_id=user.tenant_id,
                requester=requester,
                trigger=body.trigger,
                llm_max_attempts=settings.llm_max_attempts,
                approver=body.approver,
                approval_expires_after_s=body.approval_expires_after_s,
            ),
            id=run_id,
            task_queue=settings.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:
        pass  # a retried request: the run is already under way
    record = await store.get_run(run_id)
    assert record is not None
    return RunPublic.from_record(record)


def _encode_cursor(created_at: datetime, run_id: str) -> str:
    return base64.urlsafe_b64encode(f"{created_at.isoformat()}|{run_id}".encode()).decode()


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        stamp, run_id = base64.urlsafe_b64decode(cursor.encode()).decode().split("|", 1)
        return datetime.fromisoformat(stamp), run_id
    except (ValueError, UnicodeDecodeError) as exc:
        raise HTTPException(
            422, detail=[{"loc": ["query", "cursor"], "msg": "Malformed cursor; use next_cursor."}]
        ) from exc


@router.get("", response_model=RunList)
async def list_runs(
    store: StoreDep,
    user: CurrentUser,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    status_: Annotated[str | None, Query(alias="status", max_length=32)] = None,
    agent: Annotated[str | None, Query(max_length=64)] = None,
) -> RunList:
    before = _decode_cursor(cursor) if cursor else None
    runs = await store.list_runs(
        tenant_id=user.tenant_id, limit=limit, before=before, status=status_, agent=agent
    )
    next_cursor = _encode_cursor(runs[-1].created_at, runs[-1].id) if len(runs) == limit else None
    return RunList(runs=[RunPublic.from_record(r) for r in runs], next_cursor=next_cursor)


@router.get("/{run_id}", response_model=RunPublic)
async def get_run(
    run_id: str, user: CurrentUser, store: StoreDep, temporal: TemporalDep, audit: AuditDep
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
        progress: RunProgress = await handle.query(AgentRunWorkflow.progress)
    except RPCError:
        return
    if progress.status == "running":
        public.status = "running"
    public.pending_interactions = progress.pending_interactions
    public.steps = max(public.steps, progress.step)
    public.tool_calls = max(public.tool_calls, progress.tool_calls)


@router.get("/{run_id}/events", response_model=EventPage)
async def list_events(
    run_id: str,
    store: StoreDep,
    user: CurrentUser,
    audit: AuditDep,
    after: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 500,
) -> EventPage:
    await run_for(run_id, user, store, audit)
    events = await store.list_events(run_id, after=after, limit=limit)
    return EventPage(
        events=[EventPublic.from_record(e) for e in events],
        next_after=events[-1].seq if events else after,
    )
