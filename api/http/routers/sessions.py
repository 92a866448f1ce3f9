"""/v1/sessions: conversations with an agent, one active run at a time."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from keel.activities.store.session_store import SessionRecord
from keel.api.core.page_cursor import decode_cursor, encode_cursor
from keel.api.core.schemas.common import StoredText
from keel.api.core.schemas.runs import RunPublic
from keel.api.core.schemas.sessions import (
    MessageAccepted,
    SessionCreate,
    SessionDetail,
    SessionList,
    SessionMessageCreate,
    SessionPublic,
)
from keel.api.core.tenant_ids import in_view
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, documented

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], responses=AUTHENTICATED)


def _public(session: SessionRecord) -> SessionPublic:
    """The session as its tenant knows it: its id without the scope (`api.core.tenant_ids`)."""
    public = SessionPublic.model_validate(session.model_dump())
    public.id = in_view(session.tenant_id, session.id)
    return public


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=SessionPublic,
    responses=documented(409),
)
async def create_session(
    body: SessionCreate, user: CurrentUser, service: ServiceDep
) -> SessionPublic:
    return _public(await service.sessions.create(body, user))


@router.get("", response_model=SessionList)
async def list_sessions(
    user: CurrentUser,
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> SessionList:
    before = decode_cursor(cursor) if cursor else None
    page = await service.sessions.page(user, limit=limit, before=before)
    next_cursor = encode_cursor(page[-1].created_at, page[-1].id) if len(page) == limit else None
    return SessionList(sessions=[_public(s) for s in page], next_cursor=next_cursor)


@router.get("/{session_id}", response_model=SessionDetail, responses=documented(404))
async def get_session(
    session_id: StoredText, user: CurrentUser, service: ServiceDep
) -> SessionDetail:
    session, messages, active, queued = await service.sessions.history(session_id, user)
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
    responses=documented(404, 409, 503),
)
async def post_message(
    session_id: StoredText, body: SessionMessageCreate, user: CurrentUser, service: ServiceDep
) -> MessageAccepted:
    """Start a run in the session; `on_busy` says what happens if one is active. The same
    message again with the same `run_id` answers with the run it started."""
    started = await service.sessions.post_message(session_id, body, user)
    return MessageAccepted(
        run=RunPublic.from_record(started.record),
        position=started.position,
        interrupted=started.interrupted and in_view(user.tenant_id, started.interrupted),
    )
