"""/v1/memories: a user's own memories; /v1/admin/memories: an admin purges a user's."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status
from starlette.convertors import Convertor, register_url_convertor

from keel.api.core.memories import MemoriesPurged, MemoryList
from keel.api.core.schemas.common import StoredText
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, documented

router = APIRouter(prefix="/v1/memories", tags=["memories"], responses=AUTHENTICATED)
admin_router = APIRouter(
    prefix="/v1/admin/memories", tags=["admin"], responses={**AUTHENTICATED, **documented(403)}
)


class _WholeRest(Convertor[str]):
    """The rest of the path, whatever it holds: a subject (a JWT `sub`) may contain `/`,
    which the server decodes before routing. Its type validates it, not the route, so
    anything unfit is a 422 that says why, never a 404."""

    regex = r"[\s\S]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("subject", _WholeRest())

MemoryId = Annotated[StoredText, Path(min_length=1, max_length=64)]
Subject = Annotated[StoredText, Path(min_length=1, max_length=256)]


@router.get("", response_model=MemoryList)
async def list_memories(
    user: CurrentUser,
    service: ServiceDep,
    q: Annotated[StoredText | None, Query(max_length=1000, description="Words to match.")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> MemoryList:
    """What agents remember of the caller (in the caller's tenant), newest first."""
    return await service.memories.list(user, limit=limit, query=q)


@router.delete("/{memory_id}", status_code=status.HTTP_204_NO_CONTENT, responses=documented(404))
async def delete_memory(memory_id: MemoryId, user: CurrentUser, service: ServiceDep) -> Response:
    """Forget one of the caller's memories; no later run recalls it."""
    await service.memories.delete(memory_id, user)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@admin_router.delete("/{user_id:subject}", response_model=MemoriesPurged)
async def purge_memories(
    user_id: Subject,
    user: CurrentUser,
    service: ServiceDep,
    tenant: Annotated[StoredText | None, Query(min_length=1, max_length=128)] = None,
) -> MemoriesPurged:
    """Forget every memory of a user (`sub`) in a tenant (default: the admin's own)."""
    return await service.memories.purge(user_id, user, tenant_id=tenant)
