"""Quota periods: UTC days and UTC calendar months, and when each resets."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

__all__ = ["Period", "resets_at", "today"]

Period = Literal["day", "month"]


def today(now: datetime) -> date:
    """The UTC day `now` falls in."""
    return now.astimezone(UTC).date()


def resets_at(period: Period, now: datetime) -> datetime:
    """When the period `now` falls in ends: the next UTC midnight, or the first of the next
    UTC month at midnight."""
    day = today(now)
    if period == "day":
        nxt = day + timedelta(days=1)
    else:
        nxt = date(day.year + 1, 1, 1) if day.month == 12 else date(day.year, day.month + 1, 1)
    return datetime.combine(nxt, time(0), tzinfo=UTC)
