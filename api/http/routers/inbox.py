"""/v1/interactions: every pending approval and question of the caller's tenant, oldest
first — the console's approvals inbox. Deciding stays on the run's interaction endpoint."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from keel.api.core.schemas.interactions import InteractionPublic
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED

router = APIRouter(prefix="/v1/interactions", tags=["interactions"], responses=AUTHENTICATED)


@router.get("", response_model=list[InteractionPublic])
async def pending_interactions(
    user: CurrentUser,
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 200,
) -> list[InteractionPublic]:
    """Pending interactions across the tenant's live runs, oldest first."""
    return await service.inbox.pending(user, limit)
