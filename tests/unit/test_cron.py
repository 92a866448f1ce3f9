"""Cron parsing, previews and the calendars Temporal is given."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from keel.api.core.schedules.cron import CronError, CronExpression, interval_fire_times
from keel.api.core.schedules.schemas import ScheduleCreate
from keel.api.core.schedules.specs import _calendar, fire_times

START = datetime(2025, 3, 28, 12, 0, tzinfo=UTC)  # a Friday, before Europe's spring DST


@pytest.mark.parametrize(
    ("text", "minutes", "hours", "weekdays"),
    [
        ("0 2 * * *", (0,), (2,), (0, 1, 2, 3, 4, 5, 6)),
        ("*/20 9-17/4 * * MON-FRI", (0, 20, 40), (9, 13, 17), (1, 2, 3, 4, 5)),
        ("5,35 0 * * 7", (5, 35), (0,), (0,)),
        ("50/5 * * * sun,SAT", (50, 55), tuple(range(24)), (0, 6)),
        ("@hourly", (0,), tuple(range(24)), (0, 1, 2, 3, 4, 5, 6)),
        ("  0   2 * *   * ", (0,), (2,), (0, 1, 2, 3, 4, 5, 6)),
    ],
)
def test_accepted_expressions(
    text: str, minutes: tuple[int, ...], hours: tuple[int, ...], weekdays: tuple[int, ...]
) -> None:
    parsed = CronExpression.parse(text)
    assert (parsed.minutes, parsed.hours, parsed.weekdays) == (minutes, hours, weekdays)
    assert parsed.text == " ".join(text.split())


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("* * * *", "has 4 fields"),
        ("0 0 * * * 2025", "has 6 fields"),
        ("60 * * * *", "minute '60' is out of range 0-59"),
        ("0 24 * * *", "hour '24' is out of range"),
        ("0 0 0 * *", "day-of-month '0' is out of range 1-31"),
        ("0 0 * 13 *", "month '13'"),
        ("0 0 * * 8", "day-of-week '8'"),
        ("10-5 * * * *", "runs backwards"),
        ("*/0 * * * *", "step"),
        ("*/x * * * *", "step"),
        ("1,,2 * * * *", "empty"),
        ("L * * * *", "not a number"),
        ("0 0 ? * *", "not a number"),
        ("0 0 * * MON#2", "not a number"),
        ("@reboot", "Unknown cron alias"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
    ],
)
def test_refused_expressions_say_why(text: str, words: str) -> None:
    with pytest.raises(CronError) as caught:
        CronExpression.parse(text)
    assert words in str(caught.value)


def test_day_fields_must_both_match_as_in_temporal() -> None:
    monday_firsts = CronExpression.parse("0 9 1 * MON").fire_times(ZoneInfo("UTC"), START, limit=3)
    assert [t.date().isoformat() for t in monday_firsts] == [
        "2025-09-01",
        "2025-12-01",
        "2026-06-01",
    ]


def test_previews_follow_the_time_zone_across_daylight_saving() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    times = CronExpression.parse("0 2 * * *").fire_times(berlin, START, limit=4)
    assert [t.astimezone(berlin).strftime("%d %H:%M %Z") for t in times] == [
        "29 02:00 CET",
        "30 03:00 CEST",  # 02:00 does not exist that night
        "31 02:00 CEST",
        "01 02:00 CEST",
    ]
    assert [t.hour for t in times] == [1, 1, 0, 0]


def test_leap_day_schedules_are_accepted_and_found() -> None:
    [leap] = CronExpression.parse("0 0 29 2 *").fire_times(ZoneInfo("UTC"), START, limit=1)
    assert leap == datetime(2028, 2, 29, tzinfo=UTC)


def test_ranges_bound_the_search_and_include_the_start() -> None:
    hourly = CronExpression.parse("0 * * * *")
    end = START.replace(hour=15)
    times = hourly.fire_times(ZoneInfo("UTC"), START, end=end, limit=100, include_start=True)
    assert [t.hour for t in times] == [12, 13, 14, 15]
    assert hourly.fire_times(ZoneInfo("UTC"), START, end=end, limit=100)[0].hour == 13


def test_interval_fire_times_count_from_the_epoch() -> None:
    start = datetime(2025, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert [t.second for t in interval_fire_times(15, 0, start, limit=3)] == [15, 30, 45]
    shifted = interval_fire_times(3600, 600, start, limit=2)
    assert [(t.hour, t.minute) for t in shifted] == [(0, 10), (1, 10)]
    exact = datetime(2025, 1, 1, tzinfo=UTC)
    assert interval_fire_times(60, 0, exact, limit=1, include_start=True) == [exact]
    assert interval_fire_times(60, 0, exact, limit=1) == [exact.replace(minute=1)]


def test_several_expressions_merge_in_order() -> None:
    config = ScheduleCreate(
        agent="review",
        input="x",
        workspace=".",
        cron_expressions=["0 12 * * *", "30 12 * * *", "0 12 * * *"],
    )
    times = fire_times(config, START, limit=3)
    assert [(t.day, t.hour, t.minute) for t in times] == [(28, 12, 30), (29, 12, 0), (29, 12, 30)]


def test_the_calendar_keeps_the_expression_and_compresses_ranges() -> None:
    calendar = _calendar(CronExpression.parse("0,1,2,30 9-17 * JAN,FEB,DEC 1-5"))
    assert [(r.start, r.end) for r in calendar.minute] == [(0, 2), (30, 30)]
    assert [(r.start, r.end) for r in calendar.hour] == [(9, 17)]
    assert [(r.start, r.end) for r in calendar.month] == [(1, 2), (12, 12)]
    assert [(r.start, r.end) for r in calendar.day_of_week] == [(1, 5)]
    assert calendar.comment == "0,1,2,30 9-17 * JAN,FEB,DEC 1-5"
