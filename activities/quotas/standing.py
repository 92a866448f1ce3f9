"""Where a tenant (or one of its users) stands against its quotas, and the refusal it earns.

A quota is reached when what was spent in its period is at or past its ceiling (so a
ceiling of 0 refuses every run). When several are reached, the refusal names the one that
resets last: until then a new run would be refused anyway.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from keel.activities.quotas.periods import Period, resets_at
from keel.activities.store.quota_store import Spent, TenantQuota

__all__ = ["QuotaLine", "QuotaRefusal", "QuotaStanding", "standing", "user_key"]

Measure = Literal["tokens", "cost_usd"]

_CEILINGS: tuple[tuple[Period, Measure, str, str], ...] = (
    ("day", "tokens", "tokens_per_day", "day_tokens"),
    ("day", "cost_usd", "cost_usd_per_day", "day_cost_usd"),
    ("month", "tokens", "tokens_per_month", "month_tokens"),
    ("month", "cost_usd", "cost_usd_per_month", "month_cost_usd"),
)


def user_key(subject: str) -> str:
    """How the counters name a user: as runs name their requester (`user:ID`)."""
    return subject if subject.startswith("user:") else f"user:{subject}"


class QuotaLine(BaseModel):
    """One ceiling of one quota, with what its period has used of it."""

    user_id: str | None = Field(description="The user it holds for; none: the whole tenant.")
    period: Period = Field(description="A UTC day or a UTC calendar month.")
    measure: Measure
    limit: float
    used: float
    remaining: float = Field(description="What is left before new runs are refused (≥ 0).")
    resets_at: datetime = Field(description="When the period ends and the count starts again.")
    reached: bool


class QuotaRefusal(BaseModel):
    """Why a new run is refused, and for how long."""

    line: QuotaLine
    message: str
    retry_after_s: int


class QuotaStanding(BaseModel):
    """A tenant's quotas (and a user's, or every user's) against what was spent."""

    tenant_id: str
    lines: list[QuotaLine] = Field(default_factory=list)

    def refusal(self, now: datetime) -> QuotaRefusal | None:
        """The refusal of a new run, if any quota is reached."""
        reached = [line for line in self.lines if line.reached]
        if not reached:
            return None
        line = max(reached, key=lambda ln: ln.resets_at)
        wait = max(1, math.ceil((line.resets_at - now).total_seconds()))
        return QuotaRefusal(line=line, message=_sentence(self.tenant_id, line), retry_after_s=wait)


def standing(
    tenant_id: str,
    quotas: list[TenantQuota],
    spent: dict[str, Spent],
    now: datetime,
    *,
    user: str | None = None,
) -> QuotaStanding:
    """The tenant's quota lines and, with `user` (a subject), that user's; without, every
    user's quota in the tenant."""
    lines: list[QuotaLine] = []
    tenant_spent = Spent()
    for each in spent.values():
        tenant_spent = tenant_spent.plus(each)
    for quota in quotas:
        if quota.user_id is not None and user is not None and quota.user_id != user:
            continue
        used = tenant_spent if quota.user_id is None else spent.get(user_key(quota.user_id))
        lines.extend(_lines(quota, used or Spent(), now))
    return QuotaStanding(tenant_id=tenant_id, lines=lines)


def _lines(quota: TenantQuota, used: Spent, now: datetime) -> list[QuotaLine]:
    lines = []
    for period, measure, ceiling, counter in _CEILINGS:
        limit = getattr(quota, ceiling)
        if limit is None:
            continue
        value = float(getattr(used, counter))
        lines.append(
            QuotaLine(
                user_id=quota.user_id,
                period=period,
                measure=measure,
                limit=float(limit),
                used=value,
                remaining=max(0.0, float(limit) - value),
                resets_at=resets_at(period, now),
                reached=value >= limit,
            )
        )
    return lines


def _sentence(tenant_id: str, line: QuotaLine) -> str:
    period = "daily" if line.period == "day" else "monthly"
    if line.measure == "tokens":
        what, amount = "token", f"{line.used:,.0f} of {line.limit:,.0f} tokens"
    else:
        what, amount = "cost", f"${line.used:,.4f} of ${line.limit:,.4f}"
    spent_in = "today" if line.period == "day" else "this month"
    whose = (
        f"Tenant {tenant_id} has reached its {period} {what} quota"
        if line.user_id is None
        else f"User {line.user_id} has reached their {period} {what} quota in tenant {tenant_id}"
    )
    reset = line.resets_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        f"{whose} ({amount} used {spent_in}, UTC), so no new run starts until it resets at "
        f"{reset}; retry then, or ask an admin to raise the quota."
    )
