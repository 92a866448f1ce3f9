"""/v1/grants: the tenant's `approve_always` grants, listed and revoked."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from keel.api.core.schemas.common import StoredText
from keel.api.core.schemas.grants import GrantList, GrantPublic
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, documented

router = APIRouter(prefix="/v1/grants", tags=["grants"], responses=AUTHENTICATED)

GrantId = Annotated[StoredText, Path(min_length=1, max_length=64)]


@router.get("", response_model=GrantList)
async def list_grants(
    user: CurrentUser,
    service: ServiceDep,
    all: Annotated[bool, Query(description="Include revoked and expired grants.")] = False,
) -> GrantList:
    """The caller's tenant's grants, newest first; live ones unless `all`."""
    return await service.grants.list(user, include_ended=all)


@router.get("/{grant_id}", response_model=GrantPublic, responses=documented(404))
async def get_grant(grant_id: GrantId, user: CurrentUser, service: ServiceDep) -> GrantPublic:
    return await service.grants.get(grant_id, user)


@router.delete("/{grant_id}", response_model=GrantPublic, responses=documented(403, 404))
async def revoke_grant(grant_id: GrantId, user: CurrentUser, service: ServiceDep) -> GrantPublic:
    """Revoke a grant: every run it covers asks again from its next call. Revoking a revoked
    grant answers with it as it is."""
    return await service.grants.revoke(grant_id, user)
