"""/v1/admin: the audit log, usage and retention across tenants (scope keel:admin)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from keel.activities.store.audit import AuditRecord, AuditVerification
from keel.activities.store.retention_store import RetentionPolicy
from keel.api.core.schemas.admin import RetentionPolicyUpdate, RetentionSweepStarted
from keel.api.core.schemas.common import StoredText
from keel.api.core.schemas.usage import TenantUsage
from keel.api.http.deps import AdminUser, CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, documented

router = APIRouter(
    prefix="/v1/admin", tags=["admin"], responses={**AUTHENTICATED, **documented(403)}
)


@router.get("/audit", response_model=list[AuditRecord])
async def audit_entries(
    user: AdminUser,
    service: ServiceDep,
    tenant: Annotated[StoredText | None, Query(max_length=128)] = None,
    after_id: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[AuditRecord]:
    """Audit rows in order; one tenant's chain or all of them."""
    return await service.audit.entries(tenant, user, after_id=after_id, limit=limit)


@router.get("/audit/verify", response_model=AuditVerification)
async def verify_audit(
    user: AdminUser,
    service: ServiceDep,
    tenant: Annotated[StoredText | None, Query(max_length=128)] = None,
) -> AuditVerification:
    """Walk the hash chains: an edited, deleted or reordered row is reported."""
    return await service.audit.verify(tenant, user)


@router.get("/usage", response_model=list[TenantUsage])
async def usage(user: AdminUser, service: ServiceDep) -> list[TenantUsage]:
    """Runs, tokens and cost per tenant."""
    return await service.usage.by_tenant(user)


TenantId = Annotated[StoredText, Path(min_length=1, max_length=128)]


@router.get("/retention", response_model=list[RetentionPolicy])
async def retention_policies(user: CurrentUser, service: ServiceDep) -> list[RetentionPolicy]:
    """Every tenant's retention policy and its last sweep; tenants not listed keep all."""
    return await service.retention.policies(user)


@router.post("/retention/sweeps", status_code=202, response_model=RetentionSweepStarted)
async def retention_sweep(user: CurrentUser, service: ServiceDep) -> RetentionSweepStarted:
    """Fire the retention schedule now instead of at its next time."""
    return RetentionSweepStarted(schedule_id=await service.retention.sweep_now(user))


@router.get(
    "/retention/tenants/{tenant}", response_model=RetentionPolicy, responses=documented(404)
)
async def retention_policy(
    tenant: TenantId, user: CurrentUser, service: ServiceDep
) -> RetentionPolicy:
    """One tenant's policy; 404 when it has none (its runs are kept)."""
    return await service.retention.policy(tenant, user)


@router.put("/retention/tenants/{tenant}", response_model=RetentionPolicy)
async def set_retention_policy(
    tenant: TenantId, body: RetentionPolicyUpdate, user: CurrentUser, service: ServiceDep
) -> RetentionPolicy:
    """Empty the tenant's runs `days` days after they finish (audited)."""
    return await service.retention.set(tenant, body.days, user)


@router.delete("/retention/tenants/{tenant}", status_code=204, responses=documented(404))
async def clear_retention_policy(
    tenant: TenantId, user: CurrentUser, service: ServiceDep
) -> Response:
    """Keep the tenant's runs for ever again (audited)."""
    await service.retention.clear(tenant, user)
    return Response(status_code=204)
