"""Cron expressions as Keel accepts them: five fields, checked before Temporal sees them.

Temporal reads a cron string as a calendar in which every field must match. Unlike
classic cron, a schedule that restricts both the day of the month and the day of the
week fires only on days that are both (`0 9 1 * MON`: the 1st, when it is a Monday).
Keel parses the same way, hands Temporal the parsed calendar, and computes previews
and backfill counts from that same parse, so what it shows is what Temporal fires.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

__all__ = [
    "CronError",
    "CronExpression",
    "interval_fire_times",
]

FORMAT_HINT = (
    "Use five fields, minute hour day-of-month month day-of-week, "
    "e.g. '0 2 * * *' for 02:00 every day, or @hourly, @daily, @weekly, @monthly, @yearly."
)
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTHS = {
    name: number
    for number, name in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
        start=1,
    )
}
WEEKDAYS = {
    name: number for number, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))
}
# Days in each month of a leap year: a day-of-month that no month has never fires.
LONGEST_MONTH = {
    1: 31,
    2: 29,
    3: 31,
    4: 30,
    5: 31,
    6: 30,
    7: 31,
    8: 31,
    9: 30,
    10: 31,
    11: 30,
    12: 31,
}
# How far ahead a preview looks: every date recurs on every weekday within 28 years.
SEARCH_DAYS = 366 * 29
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class CronError(ValueError):
    """A cron expression Keel does not accept; the message says why and what would work."""


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int] | None = None


FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, MONTHS),
    # 7 is Sunday too, as in most crons; it is folded to 0 after parsing.
    _Field("day-of-week", 0, 7, WEEKDAYS),
)


@dataclass(frozen=True)
class CronExpression:
    """A parsed five-field expression: the values each field allows."""

    text: str
    """The expression as written (an alias such as @daily stays an alias)."""
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: tuple[int, ...]
    months: tuple[int, ...]
    weekdays: tuple[int, ...]
    """0 is Sunday."""

    @classmethod
    def parse(cls, text: str) -> CronExpression:
        """Parse strictly; raises `CronError` with a sentence naming the part at fault."""
        written = " ".join(text.split())
        if not written:
            raise CronError(f"The cron expression is empty. {FORMAT_HINT}")
        expanded = ALIASES.get(written.lower(), written)
        if expanded.startswith("@"):
            raise CronError(f"Unknown cron alias {written!r}. {FORMAT_HINT}")
        parts = expanded.split(" ")
        if len(parts) != len(FIELDS):
            raise CronError(
                f"Cron expression {written!r} has {len(parts)} fields; Keel takes exactly five "
                f"(no seconds or years). {FORMAT_HINT}"
            )
        values = [
            _parse_field(written, part, spec) for part, spec in zip(parts, FIELDS, strict=True)
        ]
        weekdays = tuple(sorted({v % 7 for v in values[4]}))
        expression = cls(
            text=written,
            minutes=values[0],
            hours=values[1],
            days=values[2],
            months=values[3],
            weekdays=weekdays,
        )
        if not any(
            day <= LONGEST_MONTH[month] for month in expression.months for day in expression.days
        ):
            raise CronError(
                f"Cron expression {written!r} never fires: no month it names has the day "
                "of the month it names."
            )
        return expression

    def matches_day(self, day: date) -> bool:
        """Whether the schedule fires on this date (every field must match, as in Temporal)."""
        weekday = (day.weekday() + 1) % 7  # date.weekday() counts from Monday
        return day.month in self.months and day.day in self.days and weekday in self.weekdays

    def fire_times(
        self,
        zone: ZoneInfo,
        start: datetime,
        *,
        end: datetime | None = None,
        limit: int = 10,
        include_start: bool = False,
    ) -> list[datetime]:
        """Up to `limit` fire times (UTC) after `start` (or at it), and not after `end`."""
        found: list[datetime] = []
        for instant in self._instants(zone, start, end):
            if instant < start or (instant == start and not include_start):
                continue
            if end is not None and instant > end:
                continue
            if found and instant <= found[-1]:
                continue  # a wall-clock time repeated when clocks go back
            found.append(instant)
            if len(found) >= limit:
                break
        return found

    def _instants(
        self, zone: ZoneInfo, start: datetime, end: datetime | None
    ) -> Iterator[datetime]:
        day = start.astimezone(zone).date() - timedelta(days=1)
        last = (
            end.astimezone(zone).date() + timedelta(days=1)
            if end
            else day + timedelta(days=SEARCH_DAYS)
        )
        while day <= last:
            if self.matches_day(day):
                for hour in self.hours:
                    for minute in self.minutes:
                        local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
                        yield local.astimezone(UTC)
            day += timedelta(days=1)


def interval_fire_times(
    every_s: int,
    offset_s: int,
    start: datetime,
    *,
    end: datetime | None = None,
    limit: int = 10,
    include_start: bool = False,
) -> list[datetime]:
    """Fire times of an interval schedule, which Temporal counts from the Unix epoch."""
    since_epoch = (start - EPOCH).total_seconds() - offset_s
    n = math.ceil(since_epoch / every_s)
    found: list[datetime] = []
    while len(found) < limit:
        instant = EPOCH + timedelta(seconds=n * every_s + offset_s)
        n += 1
        if instant < start or (instant == start and not include_start):
            continue
        if end is not None and instant > end:
            break
        found.append(instant)
    return found


def _parse_field(expression: str, part: str, spec: _Field) -> tuple[int, ...]:
    values: set[int] = set()
    for item in part.split(","):
        values.update(_parse_item(expression, item, spec))
    return tuple(sorted(values))


def _parse_item(expression: str, item: str, spec: _Field) -> range:
    def fail(why: str) -> CronError:
        return CronError(
            f"Cron expression {expression!r}: {spec.name} {item!r} {why} {FORMAT_HINT}"
        )

    if not item:
        raise fail("is empty (two commas in a row?).")
    base, _, step_text = item.partition("/")
    step = 1
    if "/" in item:
        if not step_text.isdigit() or int(step_text) == 0:
            raise fail("has a step that is not a positive whole number.")
        step = int(step_text)
    if base == "*":
        low, high = spec.low, spec.high if spec.name != "day-of-week" else 6
    elif "-" in base:
        first, _, second = base.partition("-")
        low, high = _value(first, spec, fail), _value(second, spec, fail)
        if low > high:
            raise fail(f"runs backwards ({low} > {high}); write it as two ranges.")
    else:
        low = _value(base, spec, fail)
        # "5/15" means from 5 to the end of the field in steps of 15.
        high = (spec.high if spec.name != "day-of-week" else 6) if "/" in item else low
    if step > spec.high:
        raise fail(f"has a step larger than {spec.high}.")
    return range(low, high + 1, step)


def _value(text: str, spec: _Field, fail: Callable[[str], CronError]) -> int:
    if spec.names is not None and text.upper() in spec.names:
        return spec.names[text.upper()]
    if not text.isdigit():
        known = f" or a name such as {next(iter(spec.names))}" if spec.names else ""
        raise fail(f"is not a number{known}.")
    number = int(text)
    if not spec.low <= number <= spec.high:
        raise fail(f"is out of range {spec.low}-{spec.high}.")
    return number
