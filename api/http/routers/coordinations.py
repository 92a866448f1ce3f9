"""/v1/coordinations: send one task to several A2A agents, read the merged report, list
the tenant's coordinations and cancel one."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from keel.api.core.coordinations.schemas import (
    CoordinationCreate,
    CoordinationList,
    CoordinationPublic,
)
from keel.api.core.page_cursor import decode_cursor
from keel.api.core.schemas.common import StoredText
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, documented

router = APIRouter(prefix="/v1/coordinations", tags=["coordinations"], responses=AUTHENTICATED)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=CoordinationPublic,
    responses=documented(409, 503),
)
async def create_coordination(
    body: CoordinationCreate, user: CurrentUser, service: ServiceDep
) -> CoordinationPublic:
    """Start a coordination. The same request again (same `id`) answers with the same
    coordination; the same `id` with another request is a 409. Poll `GET .../{id}` until
    its `status` is no longer `running`; then it has the merged `report`."""
    return await service.coordinations.start(body, user)


@router.get("", response_model=CoordinationList, responses=documented(503))
async def list_coordinations(
    user: CurrentUser,
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> CoordinationList:
    """Your tenant's coordinations, newest first, each as `GET .../{id}` shows it; pass
    `next_cursor` as `cursor` for the next page. One started a moment ago may take a
    second to be listed."""
    before = decode_cursor(cursor) if cursor else None
    return await service.coordinations.page(user, limit=limit, before=before)


@router.post(
    "/{coordination_id}/cancel",
    response_model=CoordinationPublic,
    responses=documented(404, 409),
)
async def cancel_coordination(
    coordination_id: StoredText, user: CurrentUser, service: ServiceDep
) -> CoordinationPublic:
    """Cancel a running coordination: it answers `cancelling` until its workflow has ended,
    then `cancelled` (asking again meanwhile answers the same); one that has ended is a
    409."""
    return await service.coordinations.cancel(coordination_id, user)


@router.get("/{coordination_id}", response_model=CoordinationPublic, responses=documented(404))
async def get_coordination(
    coordination_id: StoredText, user: CurrentUser, service: ServiceDep
) -> CoordinationPublic:
    """The coordination, with its report and each agent's outcome once it has finished."""
    return await service.coordinations.get(coordination_id, user)
