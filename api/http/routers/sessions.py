"""/v1/sessions: conversations with an agent, one active run at a time."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status
from temporalio.service import RPCError

from activities.store.session_store import SessionRecord
from api.core.audit_trail import ApiAudit
from api.core.page_cursor import decode_cursor, encode_cursor
from api.core.run_factory import (
    find_agent,
    new_run_id,
    resolve_workspace,
    run_input,
    session_workflow_id,
    submit_to_session,
)
from api.core.schemas import (
    MessageAccepted,
    RunPublic,
    SessionCreate,
    SessionDetail,
    SessionList,
    SessionMessage,
    SessionMessageCreate,
    SessionPublic,
    StoredText,
)
from api.http.deps import (
    AuditDep,
    CatalogDep,
    CurrentUser,
    SessionStoreDep,
    SettingsDep,
    StoreDep,
    TemporalDep,
)
from api.http.errors import AUTHENTICATED, documented, problem
from api.identity.auth import Principal
from api.identity.config import user_ref
from workflows.models import SessionState
from workflows.session import SessionWorkflow

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], responses=AUTHENTICATED)


def _public(session: SessionRecord) -> SessionPublic:
    return SessionPublic.model_validate(session.model_dump())


async def session_for(
    session_id: str, user: Principal, sessions: SessionStoreDep, audit: ApiAudit
) -> SessionRecord:
    """The session, if the caller's tenant owns it; 404 otherwise, audited."""
    session = await sessions.get(session_id)
    if session is None:
        raise HTTPException(404, detail=f"No session {session_id}.")
    if session.tenant_id != user.tenant_id:
        await audit.cross_tenant(user, "session", session_id)
        raise HTTPException(404, detail=f"No session {session_id}.")
    return session


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=SessionPublic,
    responses=documented(409),
)
async def create_session(
    body: SessionCreate,
    user: CurrentUser,
    sessions: SessionStoreDep,
    settings: SettingsDep,
    catalog: CatalogDep,
    audit: AuditDep,
) -> SessionPublic:
    agent = find_agent(catalog, body.agent)
    workspace = resolve_workspace(body.workspace, settings.workspace_root)
    session_id = body.session_id or f"ses-{uuid.uuid4().hex[:16]}"
    session = await sessions.create(
        session_id=session_id,
        tenant_id=user.tenant_id,
        agent=agent.name,
        workspace=str(workspace),
        model=body.model,
        approver=body.approver,
        created_by=user_ref(user),
        metadata=body.metadata,
    )
    if session.tenant_id != user.tenant_id:
        await audit.cross_tenant(user, "session", session_id)
        raise problem(409, "session_id", "That session id is taken; choose another.")
    return _public(session)


@router.get("", response_model=SessionList)
async def list_sessions(
    user: CurrentUser,
    sessions: SessionStoreDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> SessionList:
    before = decode_cursor(cursor) if cursor else None
    page = await sessions.page(tenant_id=user.tenant_id, limit=limit, before=before)
    next_cursor = encode_cursor(page[-1].created_at, page[-1].id) if len(page) == limit else None
    return SessionList(sessions=[_public(s) for s in page], next_cursor=next_cursor)


@router.get("/{session_id}", response_model=SessionDetail, responses=documented(404))
async def get_session(
    session_id: StoredText,
    user: CurrentUser,
    sessions: SessionStoreDep,
    temporal: TemporalDep,
    audit: AuditDep,
) -> SessionDetail:
    session = await session_for(session_id, user, sessions, audit)
    messages: list[SessionMessage] = []
    for run in await sessions.runs(session_id):
        messages.append(
            SessionMessage(
                role="user",
                content=run.input,
                run_id=run.id,
                run_status=run.status,
                created_at=run.created_at,
            )
        )
        if run.report:
            messages.append(
                SessionMessage(
                    role="assistant",
                    content=run.report,
                    run_id=run.id,
                    run_status=run.status,
                    created_at=run.finished_at or run.created_at,
                )
            )
    active, queued = None, []
    try:
        handle = temporal.get_workflow_handle_for(
            SessionWorkflow.run, session_workflow_id(session_id)
        )
        state: SessionState = await handle.query(SessionWorkflow.state)
        active, queued = state.active, [s.run.run_id for s in state.queue]
    except RPCError:
        pass  # no message posted yet: no session workflow
    return SessionDetail(
        **_public(session).model_dump(),
        messages=messages,
        active_run=active,
        queued_runs=queued,
    )


@router.post(
    "/{session_id}/messages",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=MessageAccepted,
    responses=documented(404, 409),
)
async def post_message(
    session_id: StoredText,
    body: SessionMessageCreate,
    user: CurrentUser,
    sessions: SessionStoreDep,
    store: StoreDep,
    temporal: TemporalDep,
    settings: SettingsDep,
    catalog: CatalogDep,
    audit: AuditDep,
) -> MessageAccepted:
    """Start a run in the session; `on_busy` says what happens if one is active."""
    session = await session_for(session_id, user, sessions, audit)
    agent = find_agent(catalog, session.agent)
    workspace = resolve_workspace(session.workspace, settings.workspace_root)
    run_id = new_run_id(body.run_id)
    existing = await store.get_run(run_id)
    if existing is not None:
        raise problem(409, "run_id", f"Run {run_id} already exists.")
    run = run_input(
        run_id=run_id,
        agent=agent,
        text=body.input,
        model=session.model or agent.model or settings.model,
        workspace=workspace,
        user=user,
        trigger="api",
        settings=settings,
        session_id=session_id,
        approver=session.approver,
        approval_expires_after_s=body.approval_expires_after_s,
    )
    outcome = await submit_to_session(
        temporal=temporal,
        store=store,
        settings=settings,
        user=user,
        run=run,
        on_busy=body.on_busy,
        metadata={},
    )
    record = await store.get_run(run_id)
    assert record is not None
    return MessageAccepted(
        run=RunPublic.from_record(record),
        position=outcome.position,
        interrupted=outcome.interrupted,
    )
