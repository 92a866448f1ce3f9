"""/v1/admin: the audit log and usage across tenants (scope keel:admin)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from activities.store.audit import AuditRecord, AuditVerification
from api.core.schemas import StoredText, TenantUsage
from api.http.deps import AdminUser, ServiceDep
from api.http.errors import AUTHENTICATED, documented

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
    return await service.parts.audit.log.entries(tenant, after_id=after_id, limit=limit)


@router.get("/audit/verify", response_model=AuditVerification)
async def verify_audit(
    user: AdminUser,
    service: ServiceDep,
    tenant: Annotated[StoredText | None, Query(max_length=128)] = None,
) -> AuditVerification:
    """Walk the hash chains: an edited, deleted or reordered row is reported."""
    return await service.parts.audit.log.verify(tenant)


@router.get("/usage", response_model=list[TenantUsage])
async def usage(user: AdminUser, service: ServiceDep) -> list[TenantUsage]:
    """Runs, tokens and cost per tenant."""
    rows = await service.parts.store.usage_by_tenant()
    return [TenantUsage.model_validate(row) for row in rows]
