"""`keel rules`: the grants `approve_always` left behind (list, revoke); the grant options
of `keel approve --always`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from urllib.parse import quote

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Column

from keel.api.cli.client import KeelClient
from keel.api.cli.command_errors import run_command
from keel.api.cli.connection import keel_api
from keel.api.cli.tables import fitted_table, id_column
from keel.api.core.schemas.grants import GrantList, GrantPublic, GrantScopeCreate

__all__ = ["UNTIL", "grant_scope", "rules_app"]

rules_app = typer.Typer(
    help="Rules that last: the grants of `approve --always` (list, revoke).", no_args_is_help=True
)
console = Console()


class GrantClient(KeelClient):
    async def __aenter__(self) -> GrantClient:
        return self

    async def grants(self, *, include_ended: bool) -> GrantList:
        params = {"all": "true"} if include_ended else {}
        response = await self._send("GET", "/v1/grants", params=params)
        return GrantList.model_validate(response.json())

    async def revoke(self, grant_id: str) -> GrantPublic:
        response = await self._send("DELETE", f"/v1/grants/{quote(grant_id, safe='')}")
        return GrantPublic.model_validate(response.json())


@rules_app.command("list")
def rules_list(
    all_: Annotated[bool, typer.Option("--all", help="Revoked and expired grants too.")] = False,
) -> None:
    """Your tenant's grants, newest first: the tool, its pattern, where it holds, who gave it."""

    async def main() -> None:
        async with keel_api(GrantClient) as (client, _):
            found = await client.grants(include_ended=all_)
        if not found.grants:
            console.print("No grants: `keel approve RUN ID --always` makes one.")
            return
        columns = [
            id_column("id", (g.id for g in found.grants)),
            *map(Column, ("tool", "pattern", "scope", "status", "granted by", "until")),
        ]
        # Model-chosen subjects are shown as text, never as markup.
        rows = [
            tuple(
                escape(cell)
                for cell in (
                    g.id,
                    g.permission,
                    g.pattern,
                    _where(g),
                    g.status,
                    g.granted_by,
                    g.until.strftime("%Y-%m-%d %H:%M") if g.until else "",
                )
            )
            for g in found.grants
        ]
        console.print(fitted_table(console, columns, rows, ("until", "granted by")))

    run_command(main())


@rules_app.command("revoke")
def rules_revoke(grant_id: str) -> None:
    """Revoke a grant: the runs it covers ask again from their next call."""

    async def main() -> None:
        async with keel_api(GrantClient) as (client, _):
            grant = await client.revoke(grant_id)
        console.print(escape(f"{grant.id}: {grant.status} by {grant.revoked_by or '?'}"))

    run_command(main())


def _where(grant: GrantPublic) -> str:
    if grant.kind == "session":
        return f"session {grant.session_id}"
    if grant.kind == "agent":
        return f"agent {grant.agent} for {grant.user}"
    return f"run {grant.run_id}"


UNTIL = ["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M%z", "%Y-%m-%d %H:%M%z"]
"""`--until` needs a time zone (`Z` or `+01:00`): a grant ends at one instant."""


def grant_scope(
    always: bool, scope: str | None, pattern: str | None, until: datetime | None
) -> GrantScopeCreate | None:
    """The grant `keel approve --always` asks for; `typer.BadParameter` if it makes no sense."""
    if not always:
        if scope or pattern or until:
            raise typer.BadParameter("--scope, --pattern and --until go with --always.")
        return None
    if scope is None and pattern is None and until is None:
        return None  # the default: this subject, for the session (or the run)
    try:
        return GrantScopeCreate.model_validate(
            {"kind": scope or "session", "pattern": pattern, "until": until}
        )
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"])
        raise typer.BadParameter(f"{where}: {problem['msg']}") from exc
