"""Tenant quotas: /v1/admin/quotas (admins set and read them), /v1/usage/quota (your own)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from keel.activities.store.quota_store import TenantQuota
from keel.api.core.quotas import QuotaUpdate, TenantQuotas
from keel.api.core.schemas.common import StoredText
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, documented

admin_router = APIRouter(
    prefix="/v1/admin/quotas", tags=["admin"], responses={**AUTHENTICATED, **documented(403)}
)
usage_router = APIRouter(prefix="/v1/usage", tags=["usage"], responses=AUTHENTICATED)

TenantId = Annotated[StoredText, Path(min_length=1, max_length=128)]
UserId = Annotated[
    StoredText | None,
    Query(
        alias="user",
        min_length=1,
        max_length=256,
        description="A user (`sub`) of the tenant: their own quota instead of the tenant's.",
    ),
]


@admin_router.get("", response_model=list[TenantQuota])
async def every_quota(user: CurrentUser, service: ServiceDep) -> list[TenantQuota]:
    """Every quota set, tenants' and users', by tenant."""
    return await service.quotas.every(user)


@admin_router.get("/tenants/{tenant}", response_model=TenantQuotas, responses=documented(404))
async def tenant_quotas(tenant: TenantId, user: CurrentUser, service: ServiceDep) -> TenantQuotas:
    """The tenant's quotas (its users' too), what each period used and what is left; 404
    when it has none."""
    return await service.quotas.tenant(tenant, user)


@admin_router.put("/tenants/{tenant}", response_model=TenantQuota)
async def set_tenant_quota(
    tenant: TenantId,
    body: QuotaUpdate,
    user: CurrentUser,
    service: ServiceDep,
    user_id: UserId = None,
) -> TenantQuota:
    """Set the tenant's quota (or, with `user`, that user's), replacing it (audited)."""
    return await service.quotas.set(tenant, user_id, body, user)


@admin_router.delete("/tenants/{tenant}", status_code=204, responses=documented(404))
async def clear_tenant_quota(
    tenant: TenantId,
    user: CurrentUser,
    service: ServiceDep,
    user_id: UserId = None,
) -> Response:
    """Remove the tenant's quota (or, with `user`, that user's) (audited)."""
    await service.quotas.clear(tenant, user_id, user)
    return Response(status_code=204)


@usage_router.get("/quota", response_model=TenantQuotas)
async def my_quota(user: CurrentUser, service: ServiceDep) -> TenantQuotas:
    """Your tenant's quota and your own: what today and this month (UTC) used, what is left,
    when each resets, and whether a new run would be refused."""
    return await service.quotas.mine(user)
