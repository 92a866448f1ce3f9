"""Tenant quotas as the service holds them: the check before every new run, and what
admins set and everyone reads.

`admit` is the one check every surface's new run passes (REST, A2A, MCP, LangGraph,
AG-UI, sessions: all start through `RunService.start`); a scheduled run checks as it
fires (`workflows.run.quota_run`). A refusal is an `OverQuota` (REST 429 with
`Retry-After`) naming the quota and when it resets, audited. Setting and clearing quotas
is for admins (`keel:admin`, refusals audited); a caller reads their own tenant's.
Periods are UTC days and UTC calendar months (`activities.quotas.periods`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from keel.activities.quotas.ledger import QUOTA_CACHE_S, QuotaLedger
from keel.activities.quotas.standing import QuotaLine
from keel.activities.store.audit import AuditEntry
from keel.activities.store.quota_store import QuotaCeilings, QuotaStore, TenantQuota
from keel.api.core.context import CoreParts
from keel.api.core.errors import Forbidden, NotFound, OverQuota
from keel.api.identity.auth import Principal
from keel.api.identity.config import user_ref

__all__ = ["QuotaService", "QuotaUpdate", "TenantQuotas"]

# Ceilings an admin may set: above these a figure is a typo, not a quota.
MAX_TOKENS = 10**13
MAX_COST_USD = 10.0**9


class QuotaUpdate(BaseModel):
    """A tenant's (or user's) quota: each ceiling per UTC day or UTC month; a ceiling left
    out is none. Setting replaces the whole quota."""

    model_config = ConfigDict(extra="forbid")

    tokens_per_day: int | None = Field(default=None, ge=0, le=MAX_TOKENS, strict=True)
    cost_usd_per_day: float | None = Field(
        default=None, ge=0, le=MAX_COST_USD, allow_inf_nan=False, strict=True
    )
    tokens_per_month: int | None = Field(default=None, ge=0, le=MAX_TOKENS, strict=True)
    cost_usd_per_month: float | None = Field(
        default=None, ge=0, le=MAX_COST_USD, allow_inf_nan=False, strict=True
    )

    @model_validator(mode="after")
    def _some_ceiling(self) -> QuotaUpdate:
        if all(v is None for v in self.model_dump().values()):
            raise ValueError(
                "set at least one of tokens_per_day, cost_usd_per_day, tokens_per_month, "
                "cost_usd_per_month (to remove a quota, DELETE it)"
            )
        return self


class TenantQuotas(BaseModel):
    """A tenant's quotas and where it stands against them."""

    tenant_id: str
    quotas: list[TenantQuota] = Field(description="The tenant's own, then its users'.")
    lines: list[QuotaLine] = Field(
        description="Each ceiling with what its period used, what is left, and its reset."
    )
    refused: str | None = Field(
        default=None, description="Why a new run would be refused now, if it would."
    )


def _utc_now() -> datetime:
    return datetime.now(UTC)


class QuotaService:
    def __init__(self, parts: CoreParts, clock: Callable[[], datetime] = _utc_now) -> None:
        self._parts = parts
        self._ledger = QuotaLedger(QuotaStore(parts.store.pool), cache_s=QUOTA_CACHE_S, clock=clock)

    async def admit(self, user: Principal, *, via: str) -> None:
        """Refuse (`OverQuota`, audited) a new run of a caller whose tenant or own quota is
        reached."""
        refusal = await self._ledger.refusal(user.tenant_id, user.subject)
        if refusal is None:
            return
        await self._parts.audit.log.append(
            AuditEntry(
                tenant_id=user.tenant_id,
                actor=user.subject,
                category="usage",
                action="quota.refused",
                severity="warning",
                subject="run",
                detail={"via": via, **refusal.line.model_dump(mode="json")},
            )
        )
        raise OverQuota(refusal.message, retry_after_s=refusal.retry_after_s)

    async def mine(self, user: Principal) -> TenantQuotas:
        """The caller's tenant's quota and the caller's own, with usage and what is left."""
        quotas = [
            q
            for q in await self._ledger.store.quotas(user.tenant_id)
            if q.user_id in (None, user.subject)
        ]
        return await self._view(user.tenant_id, quotas, user.subject)

    async def tenant(self, tenant_id: str, user: Principal) -> TenantQuotas:
        """A tenant's quotas, its users' included (admins)."""
        await self._admin(user, "read")
        quotas = await self._ledger.store.quotas(tenant_id)
        if not quotas:
            raise NotFound(f"Tenant {tenant_id} has no quota: its runs are not limited.")
        return await self._view(tenant_id, quotas, None)

    async def every(self, user: Principal) -> list[TenantQuota]:
        """Every quota set, by tenant (admins)."""
        await self._admin(user, "read")
        return await self._ledger.store.quotas()

    async def set(
        self, tenant_id: str, user_id: str | None, update: QuotaUpdate, user: Principal
    ) -> TenantQuota:
        """Set the tenant's quota (or one user's in it), replacing the one there (audited)."""
        await self._admin(user, "set")
        ceilings = QuotaCeilings.model_validate(update.model_dump())
        stored = await self._ledger.store.set_quota(tenant_id, user_id, ceilings, user_ref(user))
        self._ledger.forget(tenant_id)
        await self._audited(user, "quota.set", tenant_id, user_id, ceilings.model_dump())
        return stored

    async def clear(self, tenant_id: str, user_id: str | None, user: Principal) -> None:
        """Remove the tenant's quota (or a user's): its runs are not limited by it (audited)."""
        await self._admin(user, "clear")
        if not await self._ledger.store.clear_quota(tenant_id, user_id):
            whose = f"User {user_id} of tenant {tenant_id}" if user_id else f"Tenant {tenant_id}"
            raise NotFound(f"{whose} has no quota.")
        self._ledger.forget(tenant_id)
        await self._audited(user, "quota.cleared", tenant_id, user_id, {})

    async def _view(
        self, tenant_id: str, quotas: list[TenantQuota], subject: str | None
    ) -> TenantQuotas:
        found = await self._ledger.standing(tenant_id, subject)
        refusal = found.refusal(self._ledger.clock())
        lines = [ln for ln in found.lines if ln.user_id in (None, subject) or subject is None]
        return TenantQuotas(
            tenant_id=tenant_id,
            quotas=quotas,
            lines=lines,
            refused=refusal.message if refusal else None,
        )

    async def _admin(self, user: Principal, action: str) -> None:
        if not user.is_admin:
            await self._parts.audit.admin_refused(user, f"quota.{action}", "quotas")
            raise Forbidden("Quotas are set by admins: this needs the keel:admin scope.")

    async def _audited(
        self,
        user: Principal,
        action: str,
        tenant_id: str,
        user_id: str | None,
        detail: dict[str, JsonValue],
    ) -> None:
        await self._parts.audit.log.append(
            AuditEntry(
                tenant_id=tenant_id,
                actor=user.subject,
                category="admin",
                action=action,
                severity="info",
                subject=f"{tenant_id}/{user_id}" if user_id else tenant_id,
                detail={"by_tenant": user.tenant_id, "user_id": user_id, **detail},
            )
        )
