"""Quota periods, where a tenant stands, and which refusal it earns: pure code, at chosen
instants (the period boundaries are the clock's, not a day of waiting)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError
from temporalio.common import Priority

from keel.activities.quotas.periods import resets_at, today
from keel.activities.quotas.standing import standing
from keel.activities.store.quota_store import Spent, TenantQuota
from keel.api.core.quotas import QuotaUpdate
from keel.workflows.run.fair_share import MAX_FAIRNESS_KEY_BYTES, tenant_priority

NOW = datetime(2026, 12, 31, 23, 59, 30, tzinfo=UTC)
SET_AT = datetime(2026, 12, 1, tzinfo=UTC)


def quota(user: str | None = None, **ceilings: float) -> TenantQuota:
    return TenantQuota(
        tenant_id="acme", user_id=user, updated_by="user:root", updated_at=SET_AT, **ceilings
    )


def test_a_day_resets_at_the_next_utc_midnight_and_a_month_on_the_first() -> None:
    assert resets_at("day", NOW) == datetime(2027, 1, 1, tzinfo=UTC)
    assert resets_at("month", NOW) == datetime(2027, 1, 1, tzinfo=UTC)
    mid = datetime(2026, 2, 14, 10, tzinfo=UTC)
    assert resets_at("day", mid) == datetime(2026, 2, 15, tzinfo=UTC)
    assert resets_at("month", mid) == datetime(2026, 3, 1, tzinfo=UTC)
    # Late evening in New York is already tomorrow in UTC: the UTC day counts.
    evening = datetime(2026, 6, 30, 21, tzinfo=ZoneInfo("America/New_York"))
    assert today(evening) == date(2026, 7, 1)
    assert resets_at("month", evening) == datetime(2026, 8, 1, tzinfo=UTC)


def test_a_quota_is_reached_at_its_ceiling_and_the_refusal_names_it_and_its_reset() -> None:
    spent = {
        "user:alice": Spent(day_tokens=600, month_tokens=5_000),
        "user:bob": Spent(day_tokens=400, month_tokens=400),
    }
    found = standing("acme", [quota(tokens_per_day=1_000, tokens_per_month=100_000)], spent, NOW)
    day, month = found.lines
    assert (day.used, day.remaining, day.reached) == (1_000, 0, True)  # alice's and bob's
    assert (month.used, month.reached) == (5_400, False)
    refusal = found.refusal(NOW)
    assert refusal is not None and refusal.line == day
    assert refusal.retry_after_s == 30  # half a minute to midnight
    assert refusal.message.startswith(
        "Tenant acme has reached its daily token quota (1,000 of 1,000"
    )
    assert "resets at 2027-01-01T00:00:00Z" in refusal.message
    # One token under: no refusal.
    spent["user:bob"] = Spent(day_tokens=399)
    assert standing("acme", [quota(tokens_per_day=1_000)], spent, NOW).refusal(NOW) is None


def test_of_several_quotas_reached_the_refusal_waits_for_the_last_reset() -> None:
    mid = datetime(2026, 3, 10, 12, tzinfo=UTC)
    spent = {"user:alice": Spent(day_cost_usd=2.0, month_cost_usd=9.0)}
    found = standing("acme", [quota(cost_usd_per_day=1.0, cost_usd_per_month=5.0)], spent, mid)
    refusal = found.refusal(mid)
    assert refusal is not None and refusal.line.period == "month"
    assert refusal.retry_after_s == int((datetime(2026, 4, 1, tzinfo=UTC) - mid).total_seconds())
    assert "monthly cost quota ($9.0000 of $5.0000 used this month" in refusal.message


def test_a_users_quota_holds_for_that_user_alone_and_zero_refuses_every_run() -> None:
    quotas = [quota(tokens_per_day=10_000), quota("alice", cost_usd_per_day=0)]
    spent = {"user:bob": Spent(day_tokens=50)}
    alice = standing("acme", quotas, spent, NOW, user="alice")
    assert [(ln.user_id, ln.measure) for ln in alice.lines] == [
        (None, "tokens"),
        ("alice", "cost_usd"),
    ]
    refusal = alice.refusal(NOW)
    assert refusal is not None
    assert refusal.message.startswith(
        "User alice has reached their daily cost quota in tenant acme"
    )
    assert standing("acme", quotas, spent, NOW, user="bob").refusal(NOW) is None
    # The admin's view holds every user's lines.
    assert len(standing("acme", quotas, spent, NOW).lines) == 2


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"tokens_per_day": -1},
        {"cost_usd_per_day": float("nan")},
        {"cost_usd_per_month": float("inf")},
        {"tokens_per_month": 10**14},
        {"tokens_per_day": 1.5},
        {"per_week": 5},
    ],
)
def test_a_quota_update_refuses_what_cannot_be_a_quota(body: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        QuotaUpdate.model_validate(body)


def test_a_quota_update_takes_zero_and_any_one_ceiling() -> None:
    assert QuotaUpdate(tokens_per_day=0).tokens_per_day == 0
    assert QuotaUpdate(cost_usd_per_month=12.5).cost_usd_per_month == 12.5


def test_the_tenant_is_the_fairness_key_and_a_long_id_a_digest_of_it() -> None:
    assert tenant_priority("acme") == Priority(fairness_key="acme")
    long_a, long_b = "t" * 100 + "a", "t" * 100 + "b"
    key_a, key_b = tenant_priority(long_a).fairness_key, tenant_priority(long_b).fairness_key
    assert key_a is not None and key_b is not None and key_a != key_b
    assert len(key_a.encode()) <= MAX_FAIRNESS_KEY_BYTES
