"""`QuotaLedger`: a tenant's quotas (cached a few seconds) against its counters.

The API asks before every new run and the LLM activity after every model call, so the
common case, a tenant with no quota, must cost nothing: the tenant's quota rows are kept
for `cache_s` (an empty list too), and the counters are read only for a tenant that has
one. An admin's change is seen at once by the process that made it (`forget`) and within
`cache_s` by every other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from keel.activities.quotas.periods import today
from keel.activities.quotas.standing import QuotaRefusal, QuotaStanding, standing
from keel.activities.store.quota_store import QuotaStore, TenantQuota

__all__ = ["QUOTA_CACHE_S", "QuotaLedger"]

QUOTA_CACHE_S = 5.0
"""How long a process keeps a tenant's quota rows: an admin's change holds everywhere
within this, and a tenant without quotas costs one read this often per process."""

# Tenants whose quota rows a process keeps, at most; past it the cache starts afresh.
MAX_CACHED_TENANTS = 10_000


def _utc_now() -> datetime:
    return datetime.now(UTC)


class QuotaLedger:
    def __init__(
        self,
        store: QuotaStore,
        *,
        cache_s: float,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.store = store
        self._cache_s = cache_s
        self.clock = clock
        self._quotas: dict[str, tuple[float, list[TenantQuota]]] = {}

    async def quotas(self, tenant_id: str) -> list[TenantQuota]:
        """The tenant's quota rows, from the cache while it is fresh."""
        kept = self._quotas.get(tenant_id)
        if kept is not None and time.monotonic() - kept[0] < self._cache_s:
            return kept[1]
        rows = await self.store.quotas(tenant_id)
        if len(self._quotas) >= MAX_CACHED_TENANTS:
            self._quotas.clear()
        self._quotas[tenant_id] = (time.monotonic(), rows)
        return rows

    def forget(self, tenant_id: str) -> None:
        """Read the tenant's quotas afresh next time (they were just changed)."""
        self._quotas.pop(tenant_id, None)

    async def standing(self, tenant_id: str, user: str | None = None) -> QuotaStanding:
        """The tenant's quotas (and `user`'s, or with none every user's) against today's and
        this month's counters."""
        quotas = await self.quotas(tenant_id)
        if not quotas:
            return QuotaStanding(tenant_id=tenant_id)
        now = self.clock()
        spent = await self.store.spent(tenant_id, today(now))
        return standing(tenant_id, quotas, spent, now, user=user)

    async def refusal(self, tenant_id: str, user: str) -> QuotaRefusal | None:
        """Why a new run of `user` (a subject) in the tenant is refused, if it is."""
        quotas = await self.quotas(tenant_id)
        if not quotas:
            return None
        found = await self.standing(tenant_id, user)
        return found.refusal(self.clock())
