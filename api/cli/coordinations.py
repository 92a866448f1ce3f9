"""`keel coordinations`: list the tenant's coordinations and cancel one (`keel coordinate`
starts one)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from keel.api.cli.client import KeelClient
from keel.api.cli.command_errors import run_command
from keel.api.cli.connection import keel_api
from keel.api.cli.tables import id_column
from keel.api.core.coordinations.schemas import CoordinationPublic

coordinations_app = typer.Typer(
    help="Coordinations (`keel coordinate`): list them, cancel one.", no_args_is_help=True
)
console = Console()
err_console = Console(stderr=True)


def _answered(c: CoordinationPublic) -> str:
    """`2 of 3` once it has finished; blank while it runs."""
    if not c.outcomes:
        return ""
    done = sum(1 for o in c.outcomes if o.status == "completed")
    return f"{done} of {len(c.outcomes)}"


@coordinations_app.command("list")
def list_(
    limit: Annotated[int, typer.Option("--limit", min=1, max=100)] = 20,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="Where the previous page ended.")
    ] = None,
) -> None:
    """List this tenant's coordinations, newest first."""

    async def main() -> None:
        async with keel_api(KeelClient) as (client, _):
            page = await client.list_coordinations(limit, cursor)
        table = Table(
            id_column("id", (c.id for c in page.coordinations)),
            *("status", "agents", "answered", "by", "created"),
        )
        for c in page.coordinations:
            table.add_row(
                c.id,
                c.status,
                ", ".join(a.name or a.url for a in c.agents),
                _answered(c),
                c.requester.removeprefix("user:"),
                c.created_at.strftime("%Y-%m-%d %H:%M:%S") if c.created_at else "",
            )
        console.print(table)
        if page.next_cursor:
            console.print(
                f"More: keel coordinations list --cursor {page.next_cursor}", soft_wrap=True
            )

    run_command(main())


@coordinations_app.command("cancel")
def cancel(coordination_id: str) -> None:
    """Cancel a running coordination; its agents' sections are not merged."""

    async def main() -> None:
        async with keel_api(KeelClient) as (client, _):
            c = await client.cancel_coordination(coordination_id)
        console.print(f"{c.id}: {c.status}")

    run_command(main())
