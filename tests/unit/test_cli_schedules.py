"""`keel schedules create --dry-run`: local checks and the preview, with no stack at all."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from keel.api.cli.main import app
from keel.api.cli.schedules import parse_duration, parse_time

runner = CliRunner()


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("15m", 900), ("2h", 7200), ("1h30m", 5400)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "1x", "1h 30m", "-5s"])
def test_bad_durations_say_how_to_write_one(text: str) -> None:
    with pytest.raises(typer.BadParameter, match=r"write e\.g\. 90s"):
        parse_duration(text)


def test_times_without_an_offset_are_utc() -> None:
    assert parse_time("2025-01-01T02:00:00").isoformat() == "2025-01-01T02:00:00+00:00"
    assert parse_time("2025-01-01T02:00:00+01:00").utcoffset() is not None


def test_a_dry_run_previews_in_the_time_zone_and_creates_nothing(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "schedules", "create", "review", "Review.", "--cron", "30 6 * * SAT,SUN",
            "--tz", "America/New_York", "--workspace", str(tmp_path), "--preview", "3",
            "--dry-run",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "Fires 30 6 * * SAT,SUN (America/New_York); next 3:"
    assert len(lines) == 5 and lines[-1] == "Dry run: nothing was created."
    for line in lines[1:4]:
        # In the schedule's own zone, named with the offset in force (EST in December).
        assert (
            line.strip().startswith(("Sat ", "Sun "))
            and " 06:30:00 America/New_York (UTC-0" in line
        )


def test_an_invalid_schedule_is_refused_before_any_call(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "schedules", "create", "review", "Review.", "--cron", "0 0 * * FUNDAY",
            "--tz", "Moon/Base", "--workspace", str(tmp_path),
        ],
    )  # fmt: skip
    assert result.exit_code == 1
    said = " ".join(result.output.split())  # the console wraps long lines
    assert "day-of-week 'FUNDAY' is not a number" in said
    assert "Unknown time zone 'Moon/Base'" in said
    neither = runner.invoke(
        app, ["schedules", "create", "review", "Review.", "--workspace", str(tmp_path)]
    )
    assert neither.exit_code == 1 and "Give --cron" in neither.output
