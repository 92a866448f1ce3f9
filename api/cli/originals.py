"""`keel original KIND RUN_ID STEP CALL_ID`: the original of a masked tool output or
arguments (needs keel:read-original in KEEL_TOKEN; the read is audited before it is shown)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from keel.api.cli.client import KeelClient
from keel.api.cli.command_errors import run_command
from keel.api.cli.connection import keel_api
from keel.api.core.schemas.originals import OriginalKindName, OriginalPublic, OriginalRead

console = Console()


class OriginalsClient(KeelClient):
    async def __aenter__(self) -> OriginalsClient:
        return self

    async def original(
        self, kind: str, run_id: str, step: int, call_id: str, reason: str | None
    ) -> OriginalPublic:
        body = OriginalRead(reason=reason).model_dump()
        response = await self._send(
            "POST", f"/v1/admin/originals/{kind}/{run_id}/{step}/{call_id}", json=body
        )
        return OriginalPublic.model_validate(response.json())


def original_command(
    kind: Annotated[OriginalKindName, typer.Argument(help="`tool-output` or `tool-arguments`.")],
    run_id: Annotated[str, typer.Argument(help="The run.")],
    step: Annotated[int, typer.Argument(help="The step of the call (its events say).", min=0)],
    call_id: Annotated[str, typer.Argument(help="The call's id (its events say).")],
    reason: Annotated[
        str | None, typer.Option(help="Why you read it; kept in the audit entry.")
    ] = None,
) -> None:
    """Print the unmasked original of a tool call's output or arguments; the read is audited
    first. Needs a KEEL_TOKEN with the keel:read-original scope."""

    async def main() -> None:
        async with keel_api(OriginalsClient) as (client, _):
            found = await client.original(kind, run_id, step, call_id, reason)
        # Printed as it is: markup in a tool's output must not style the terminal.
        console.print(found.original, markup=False, highlight=False, soft_wrap=True)
        console.print(f"(read recorded as audit entry {found.audit_id})", style="dim")

    run_command(main())
