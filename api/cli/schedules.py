"""`keel schedules`: agent runs on Temporal Schedules, from the command line."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, cast, get_args

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from keel.api.cli.ceiling_options import CEILING_FLAGS, MaxCost, MaxTokens, cost_usd
from keel.api.cli.command_errors import fail, run_command
from keel.api.cli.connection import keel_api
from keel.api.cli.flag_names import error_lines
from keel.api.cli.schedule_client import ScheduleClient
from keel.api.cli.tables import id_column
from keel.api.core.schedules.schemas import (
    BackfillOverlap,
    OverlapPolicy,
    ScheduleBackfillCreate,
    ScheduleCreate,
    SchedulePublic,
)
from keel.api.core.schedules.shown_time import in_zone
from keel.api.core.schedules.specs import fire_times

schedules_app = typer.Typer(
    help="Scheduled agent runs on Temporal Schedules: they fire while a worker runs.",
    no_args_is_help=True,
)
console = Console()
err_console = Console(stderr=True)

DURATION_PART = re.compile(r"(\d+)([smhd])")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
OVERLAPS = ", ".join(get_args(OverlapPolicy))


def parse_duration(text: str) -> int:
    """Seconds in `90`, `90s`, `15m`, `2h`, `1d` or `1h30m`."""
    compact = text.strip().lower()
    if compact.isdigit():
        return int(compact)
    parts = DURATION_PART.findall(compact)
    if not parts or "".join(n + u for n, u in parts) != compact:
        raise typer.BadParameter(
            f"{text!r} is not a duration; write e.g. 90s, 15m, 2h, 1d or 1h30m."
        )
    return sum(int(n) * UNIT_SECONDS[u] for n, u in parts)


def parse_time(text: str) -> datetime:
    """An ISO 8601 time; one without an offset is taken as UTC."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is not a time; write ISO 8601, e.g. 2025-01-31T02:00:00+01:00."
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@asynccontextmanager
async def _client() -> AsyncIterator[ScheduleClient]:
    async with keel_api(ScheduleClient) as (client, info):
        if info.started_here:
            console.print(
                "[dim]No Keel API was running, so this command started one for itself; "
                "schedules fire while `keel dev` (or a worker) runs.[/dim]"
            )
        yield client


def _when(schedule: ScheduleCreate | SchedulePublic) -> str:
    if schedule.interval_s:
        return f"every {_duration(schedule.interval_s)}"
    return "; ".join(schedule.cron_expressions)


def _duration(seconds: int) -> str:
    parts = []
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"


@schedules_app.command("create")
def create(
    agent: Annotated[str, typer.Argument(help="Agent to run.")],
    prompt: Annotated[str, typer.Argument(help="The task each run is given.")],
    cron: Annotated[
        list[str] | None,
        typer.Option(help="Five-field cron expression, e.g. '0 2 * * *' (repeatable)."),
    ] = None,
    every: Annotated[str | None, typer.Option(help="Interval instead of cron, e.g. 6h.")] = None,
    offset: Annotated[str, typer.Option(help="Shift interval fire times, e.g. 15m.")] = "0",
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone of the cron times.")] = "UTC",
    jitter: Annotated[str, typer.Option(help="Random delay added to each fire time.")] = "0",
    overlap: Annotated[str, typer.Option(help=f"If the last run still runs: {OVERLAPS}.")] = "skip",
    catchup: Annotated[
        str, typer.Option(help="After an outage, run fire times missed by up to this.")
    ] = "1h",
    workspace: Annotated[Path, typer.Option(help="Directory the runs work on.")] = Path("."),
    approver: Annotated[
        str | None, typer.Option(help="Who decides its runs' approvals, e.g. user:bob.")
    ] = None,
    approval_expiry: Annotated[
        str | None, typer.Option(help="How long approval requests wait, e.g. 4h.")
    ] = None,
    webhook: Annotated[
        str | None, typer.Option(help="URL told when a run waits for approval or ends.")
    ] = None,
    schedule_id: Annotated[str | None, typer.Option("--id", help="Choose the id.")] = None,
    model: Annotated[str | None, typer.Option(help="Overrides the agent's model.")] = None,
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    note: Annotated[str | None, typer.Option(help="A note shown with the schedule.")] = None,
    preview: Annotated[int, typer.Option(min=0, max=50, help="Fire times to preview.")] = 5,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check and preview; create nothing.")
    ] = False,
    max_tokens: MaxTokens = None,
    max_cost: MaxCost = None,
) -> None:
    """Create a schedule, after checking it and previewing its next fire times."""
    try:
        body = ScheduleCreate.model_validate(
            {
                "schedule_id": schedule_id,
                "agent": agent,
                "input": prompt,
                "workspace": str(workspace.expanduser().resolve()),
                "model": model,
                "cron_expressions": cron or [],
                "interval_s": parse_duration(every) if every else None,
                "interval_offset_s": parse_duration(offset),
                "time_zone": tz,
                "jitter_s": parse_duration(jitter),
                "overlap": overlap,
                "catchup_window_s": parse_duration(catchup),
                "paused": paused,
                "note": note,
                "approver": approver,
                "approval_expires_after_s": parse_duration(approval_expiry)
                if approval_expiry
                else None,
                "webhook_url": webhook,
                "max_total_tokens": max_tokens,
                "max_cost_usd": cost_usd(max_cost),
            }
        )
    except ValidationError as exc:
        for line in error_lines(exc.errors(), default="schedule", flags=CEILING_FLAGS):
            err_console.print(f"[red]error:[/red] {escape(line)}", highlight=False)
        raise typer.Exit(code=1) from None
    if bool(body.cron_expressions) == (body.interval_s is not None):
        raise fail("Give --cron (one or more) or --every: one says when the schedule fires.")
    if preview:
        console.print(f"Fires {_when(body)} ({body.time_zone}); next {preview}:")
        for moment in fire_times(body, datetime.now(UTC), limit=preview):
            console.print(f"  {in_zone(moment, body.time_zone)}")
    if dry_run:
        console.print("Dry run: nothing was created.")
        return

    async def main() -> None:
        async with _client() as client:
            made = await client.create_schedule(body)
        state = "paused" if made.paused else "active"
        console.print(f"Schedule [bold]{made.id}[/bold] created ({state}).")
        if made.next_fire_times and not made.paused:
            console.print(f"Temporal fires it next at {in_zone(made.next_fire_times[0], tz)}.")

    run_command(main())


@schedules_app.command("list")
def list_(limit: Annotated[int, typer.Option(min=1, max=200)] = 50) -> None:
    """List this tenant's schedules."""

    async def main() -> None:
        async with _client() as client:
            page = await client.list_schedules(limit)
        table = Table(
            id_column("id", (s.id for s in page.schedules)),
            *("agent", "by", "when", "zone", "state", "next fire", "runs"),
        )
        for s in page.schedules:
            nxt = in_zone(s.next_fire_times[0], s.time_zone) if s.next_fire_times else ""
            table.add_row(
                s.id,
                s.agent,
                s.created_by.removeprefix("user:"),
                _when(s),
                s.time_zone,
                "paused" if s.paused else "active",
                "" if s.paused else nxt,
                str(s.runs_started),
            )
        console.print(table)

    run_command(main())


@schedules_app.command("show")
def show(schedule_id: str) -> None:
    """Show a schedule, its next fire times and its recent runs."""

    async def main() -> None:
        async with _client() as client:
            s = await client.get_schedule(schedule_id)
            runs = await client.schedule_runs(schedule_id, limit=10)
        console.print(f"[bold]{s.id}[/bold]: {s.agent} {_when(s)} ({s.time_zone})")
        state = f"paused ({s.note})" if s.paused else "active"
        console.print(f"  state     {state}")
        console.print(f"  overlap   {s.overlap}, catch-up {_duration(s.catchup_window_s)}")
        console.print(f"  workspace {s.workspace}")
        console.print(f"  input     {s.input[:200]}")
        if s.approver:
            console.print(f"  approver  {s.approver}")
        if s.webhook_url:
            console.print(f"  webhook   {s.webhook_url}")
        if s.max_total_tokens is not None or s.max_cost_usd is not None:
            tokens = f"{s.max_total_tokens} tokens" if s.max_total_tokens is not None else ""
            cost = f"${s.max_cost_usd:g}" if s.max_cost_usd is not None else ""
            console.print(f"  ceiling   {' and '.join(p for p in (tokens, cost) if p)} a run")
        console.print(
            f"  started {s.runs_started} runs; skipped {s.skipped_overlap} (overlap), "
            f"missed {s.missed_catchup_window} (catch-up window)"
        )
        if s.next_fire_times and not s.paused:
            console.print("Next fire times:")
            for moment in s.next_fire_times[:5]:
                console.print(f"  {in_zone(moment, s.time_zone)}")
        table = Table(
            id_column("run", (run.id for run in runs.runs)), "status", "stop reason", "created"
        )
        for run in runs.runs:
            table.add_row(
                run.id,
                run.status,
                run.stop_reason or "",
                in_zone(run.created_at, s.time_zone),
            )
        console.print(table)

    run_command(main())


@schedules_app.command("pause")
def pause(
    schedule_id: str,
    note: Annotated[str | None, typer.Option(help="Why; shown with the schedule.")] = None,
) -> None:
    """Stop firing until resumed; runs already going carry on."""

    async def main() -> None:
        async with _client() as client:
            s = await client.pause_schedule(schedule_id, note)
        console.print(f"{s.id}: paused ({s.note})")

    run_command(main())


@schedules_app.command("resume")
def resume(
    schedule_id: str,
    note: Annotated[str | None, typer.Option(help="Shown with the schedule.")] = None,
) -> None:
    """Fire again from the next fire time."""

    async def main() -> None:
        async with _client() as client:
            s = await client.unpause_schedule(schedule_id, note)
        nxt = f"; next at {in_zone(s.next_fire_times[0], s.time_zone)}" if s.next_fire_times else ""
        console.print(f"{s.id}: active{nxt}")

    run_command(main())


@schedules_app.command("trigger")
def trigger(
    schedule_id: str,
    overlap: Annotated[
        str | None, typer.Option(help="Override the overlap policy for this run.")
    ] = None,
) -> None:
    """Start a run now, paused or not."""
    if overlap is not None and overlap not in get_args(BackfillOverlap):
        raise fail(f"--overlap must be one of {', '.join(get_args(BackfillOverlap))}.")
    chosen = cast(BackfillOverlap | None, overlap)

    async def main() -> None:
        async with _client() as client:
            result = await client.trigger_schedule(schedule_id, chosen)
        if result.skipped:
            console.print(f"{schedule_id}: skipped, its last run is still going (overlap policy).")
        elif result.run_id:
            console.print(f"{schedule_id}: started run [bold]{result.run_id}[/bold]")
        else:
            console.print(f"{schedule_id}: triggered; `keel schedules show` lists the run.")

    run_command(main())


@schedules_app.command("backfill")
def backfill(
    schedule_id: str,
    start: Annotated[str, typer.Option(help="ISO 8601; without an offset, UTC.")],
    end: Annotated[str, typer.Option(help="ISO 8601; without an offset, UTC.")],
    overlap: Annotated[
        str, typer.Option(help="buffer_all runs them one after another.")
    ] = "buffer_all",
) -> None:
    """Start now the runs of every fire time from --start to --end (both included)."""
    try:
        body = ScheduleBackfillCreate.model_validate(
            {"start": parse_time(start), "end": parse_time(end), "overlap": overlap}
        )
    except ValidationError as exc:
        raise fail("; ".join(str(e["msg"]) for e in exc.errors())) from None

    async def main() -> None:
        async with _client() as client:
            result = await client.backfill_schedule(schedule_id, body)
        console.print(f"{schedule_id}: backfilling {result.fire_times} runs.")

    run_command(main())


@schedules_app.command("delete")
def delete(
    schedule_id: str,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask.")] = False,
) -> None:
    """Delete a schedule; the runs it started stay."""
    if not yes:
        typer.confirm(f"Delete schedule {schedule_id}?", abort=True)

    async def main() -> None:
        async with _client() as client:
            await client.delete_schedule(schedule_id)
        console.print(f"{schedule_id}: deleted")

    run_command(main())
