"""What tenants have used: LLM calls, tokens and cost."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from keel.activities.store.console_reads import ConsoleReads, UsageRow
from keel.api.core.context import CoreParts
from keel.api.core.errors import Forbidden
from keel.api.core.schemas.usage import TenantUsage
from keel.api.identity.auth import Principal

__all__ = ["UsageReads"]


class UsageReads:
    def __init__(self, parts: CoreParts, reads: ConsoleReads) -> None:
        self._store = parts.store
        self._audit = parts.audit
        self._reads = reads

    async def daily(self, user: Principal, days: int) -> list[UsageRow]:
        """The caller's tenant's usage: one row per UTC day and agent with any LLM call in
        the last `days` days."""
        midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return await self._reads.usage(user.tenant_id, midnight - timedelta(days=days - 1))

    async def by_tenant(self, user: Principal) -> list[TenantUsage]:
        """Runs, tokens and cost per tenant (admins only)."""
        if not user.is_admin:
            await self._audit.admin_refused(user, "usage.read", "usage")
            raise Forbidden("This endpoint needs the keel:admin scope.")
        return [TenantUsage.model_validate(row) for row in await self._store.usage_by_tenant()]
