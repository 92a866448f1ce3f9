"""Tenant quotas (`tenant_quotas`) and the day counters they hold against (`tenant_usage_days`).

A quota row is a tenant's (user_id '') or one of its users'; each of its four ceilings
may be unset. The counters grow in the statement that records a model call
(`COUNT_TENANT_USAGE_SQL`, part of `llm_call_rows.RECORD_LLM_CALL_SQL`), so a call counts
once however often its activity retries, and retention never purges them.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, Field

from keel.activities.store.store_pool import PooledStore

__all__ = ["COUNT_TENANT_USAGE_SQL", "QuotaCeilings", "QuotaStore", "Spent", "TenantQuota"]

COUNT_TENANT_USAGE_SQL = (
    "INSERT INTO tenant_usage_days (tenant_id, day, user_id, tokens, cost_usd)"
    " SELECT tenant_id, (now() AT TIME ZONE 'UTC')::date, requester,"
    " %(prompt)s::bigint + %(completion)s::bigint, %(cost)s::numeric FROM run"
    " ON CONFLICT (tenant_id, day, user_id) DO UPDATE SET"
    " tokens = tenant_usage_days.tokens + excluded.tokens,"
    " cost_usd = tenant_usage_days.cost_usd + excluded.cost_usd"
)
"""The tail of the model call's statement: its tokens and cost on the run's tenant and
requester's counter for today (UTC); it needs the CTE `run` (tenant_id, requester)."""

QUOTA_COLUMNS = (
    "tenant_id, user_id, tokens_per_day, cost_usd_per_day::float AS cost_usd_per_day,"
    " tokens_per_month, cost_usd_per_month::float AS cost_usd_per_month, updated_by, updated_at"
)
TENANT_QUOTAS_SQL = (
    f"SELECT {QUOTA_COLUMNS} FROM tenant_quotas WHERE tenant_id = %s ORDER BY user_id"
)
ALL_QUOTAS_SQL = f"SELECT {QUOTA_COLUMNS} FROM tenant_quotas ORDER BY tenant_id, user_id"
UPSERT_QUOTA_SQL = (
    "INSERT INTO tenant_quotas (tenant_id, user_id, tokens_per_day, cost_usd_per_day,"
    " tokens_per_month, cost_usd_per_month, updated_by)"
    " VALUES (%(tenant)s, %(user)s, %(tokens_per_day)s, %(cost_usd_per_day)s,"
    " %(tokens_per_month)s, %(cost_usd_per_month)s, %(by)s)"
    " ON CONFLICT (tenant_id, user_id) DO UPDATE SET"
    " tokens_per_day = excluded.tokens_per_day, cost_usd_per_day = excluded.cost_usd_per_day,"
    " tokens_per_month = excluded.tokens_per_month,"
    " cost_usd_per_month = excluded.cost_usd_per_month,"
    " updated_by = excluded.updated_by, updated_at = now()"
    f" RETURNING {QUOTA_COLUMNS}"
)
DELETE_QUOTA_SQL = "DELETE FROM tenant_quotas WHERE tenant_id = %s AND user_id = %s"
# Each user's spending today and this month (both UTC), from at most a month of counters.
SPENT_SQL = (
    "SELECT user_id,"
    " coalesce(sum(tokens) FILTER (WHERE day = %(today)s), 0)::bigint AS day_tokens,"
    " coalesce(sum(cost_usd) FILTER (WHERE day = %(today)s), 0)::float AS day_cost_usd,"
    " sum(tokens)::bigint AS month_tokens, sum(cost_usd)::float AS month_cost_usd"
    " FROM tenant_usage_days WHERE tenant_id = %(tenant)s AND day >= %(month)s"
    " AND day <= %(today)s GROUP BY user_id"
)
REQUESTER_SQL = "SELECT requester FROM runs WHERE id = %s"


class QuotaCeilings(BaseModel):
    """What a tenant (or a user) may spend per UTC day and month; None is no ceiling."""

    tokens_per_day: int | None = Field(default=None, description="Prompt + completion tokens.")
    cost_usd_per_day: float | None = Field(default=None, description="US dollars.")
    tokens_per_month: int | None = None
    cost_usd_per_month: float | None = None


class TenantQuota(QuotaCeilings):
    """A quota as stored: whose it is and who set it."""

    tenant_id: str
    user_id: str | None = Field(
        default=None, description="The user it holds for; none: the tenant as a whole."
    )
    updated_by: str
    updated_at: datetime


class Spent(BaseModel):
    """What one user (or, summed, a tenant) spent today and this month."""

    day_tokens: int = 0
    day_cost_usd: float = 0.0
    month_tokens: int = 0
    month_cost_usd: float = 0.0

    def plus(self, other: Spent) -> Spent:
        return Spent(
            day_tokens=self.day_tokens + other.day_tokens,
            day_cost_usd=self.day_cost_usd + other.day_cost_usd,
            month_tokens=self.month_tokens + other.month_tokens,
            month_cost_usd=self.month_cost_usd + other.month_cost_usd,
        )


def _quota(row: dict[str, Any]) -> TenantQuota:
    return TenantQuota.model_validate({**row, "user_id": row["user_id"] or None})


class QuotaStore(PooledStore):
    async def quotas(self, tenant_id: str | None = None) -> list[TenantQuota]:
        """A tenant's quotas (its own first, then its users'), or every tenant's."""
        async with self._pool.connection() as conn:
            if tenant_id is None:
                cur = await conn.execute(ALL_QUOTAS_SQL)
            else:
                cur = await conn.execute(TENANT_QUOTAS_SQL, (tenant_id,))
            return [_quota(row) for row in await cur.fetchall()]

    async def set_quota(
        self, tenant_id: str, user_id: str | None, ceilings: QuotaCeilings, by: str
    ) -> TenantQuota:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                UPSERT_QUOTA_SQL,
                {"tenant": tenant_id, "user": user_id or "", "by": by, **ceilings.model_dump()},
            )
            row = await cur.fetchone()
        assert row is not None
        return _quota(row)

    async def clear_quota(self, tenant_id: str, user_id: str | None) -> bool:
        async with self._pool.connection() as conn:
            cur = await conn.execute(DELETE_QUOTA_SQL, (tenant_id, user_id or ""))
            return cur.rowcount > 0

    async def spent(self, tenant_id: str, today: date) -> dict[str, Spent]:
        """Each user's spending in the tenant today and in today's month (UTC)."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                SPENT_SQL, {"tenant": tenant_id, "today": today, "month": today.replace(day=1)}
            )
            rows = await cur.fetchall()
        return {row.pop("user_id"): Spent.model_validate(row) for row in rows}

    async def requester(self, run_id: str) -> str | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(REQUESTER_SQL, (run_id,))
            row = await cur.fetchone()
        return None if row is None else str(row["requester"])
