"""/v1/coordinations: send one task to several A2A agents and read the merged report."""

from __future__ import annotations

from fastapi import APIRouter, status

from api.core.coordination_schemas import CoordinationCreate, CoordinationPublic
from api.core.schemas import StoredText
from api.http.deps import CurrentUser, ServiceDep
from api.http.errors import AUTHENTICATED, documented

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


@router.get("/{coordination_id}", response_model=CoordinationPublic, responses=documented(404))
async def get_coordination(
    coordination_id: StoredText, user: CurrentUser, service: ServiceDep
) -> CoordinationPublic:
    """The coordination, with its report and each agent's outcome once it has finished."""
    return await service.coordinations.get(coordination_id, user)
