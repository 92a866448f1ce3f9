"""`keel runs`: list, show and cancel runs, each showing its tree's usage."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Column

from keel.api.cli.client import KeelClient
from keel.api.cli.command_errors import run_command
from keel.api.cli.connection import keel_api
from keel.api.cli.run_view import run_view
from keel.api.cli.tables import fitted_table, id_column

__all__ = ["runs_app"]

runs_app = typer.Typer(help="Inspect runs.", no_args_is_help=True)
console = Console()

TOKENS = "tokens (with sub-agents)"


@runs_app.command("list")
def runs_list(
    limit: Annotated[int, typer.Option(min=1, max=200)] = 20,
    children: Annotated[
        bool, typer.Option("--children", help="List sub-agent runs too, not only top-level ones.")
    ] = False,
    parent: Annotated[
        str | None, typer.Option("--parent", help="List the sub-agent runs this run started.")
    ] = None,
    status: Annotated[
        str | None,
        typer.Option("--status", help="Only runs in this status, e.g. waiting or running."),
    ] = None,
) -> None:
    """List recent top-level runs, each with how many sub-agent runs it started."""

    async def main() -> None:
        async with keel_api(KeelClient) as (client, _):
            page = await client.list_runs(limit, children=children, parent=parent, status=status)
        columns = [
            id_column("id", (run.id for run in page.runs)),
            *map(Column, ("agent", "status", "stop reason", "steps", "tools", "children")),
            *map(Column, (TOKENS, "cost", "created")),
        ]
        rows = []
        for run in page.runs:
            total = run.total_usage or run.usage
            rows.append(
                (
                    run.id,
                    run.agent,
                    run.status + (f" · {run.coverage.status}" if run.coverage is not None else ""),
                    run.stop_reason or "",
                    str(run.steps),
                    str(run.tool_calls),
                    str(run.child_count),
                    str(total.total_tokens),
                    f"${total.cost_usd:.4f}",
                    run.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                )
            )
        optional = ("created", "tools", "steps", "stop reason", "cost", "children", TOKENS)
        table = fitted_table(console, columns, rows, optional)
        console.print(table)

    run_command(main())


@runs_app.command("cancel")
def runs_cancel(run_id: str) -> None:
    """Cancel a run (a queued one leaves its session's queue)."""

    async def main() -> None:
        async with keel_api(KeelClient) as (client, _):
            run = await client.cancel(run_id)
        console.print(f"{run.id}: {run.status}")

    run_command(main())


@runs_app.command("show")
def runs_show(
    run_id: str,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the run as the API answers it, as JSON.")
    ] = False,
) -> None:
    """Show one run: what it was asked, how it ended, its sub-agent runs and its report."""

    async def main() -> None:
        async with keel_api(KeelClient) as (client, _):
            run = await client.get_run(run_id)
        if as_json:
            console.print_json(run.model_dump_json())
        else:
            console.print(run_view(run))

    run_command(main())
