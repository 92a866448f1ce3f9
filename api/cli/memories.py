"""`keel memories`: what agents remember of you; an admin's `purge` of a user's."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

import typer
from rich.console import Console
from rich.text import Text

from keel.api.cli.client import KeelClient
from keel.api.cli.command_errors import run_command
from keel.api.cli.connection import keel_api
from keel.api.core.memories import MemoriesPurged, MemoryList

memories_app = typer.Typer(
    help="What agents with `memory: true` remember of you (list, delete).",
    no_args_is_help=True,
)
console = Console()


class MemoryClient(KeelClient):
    async def __aenter__(self) -> MemoryClient:
        return self

    async def memories(self, query: str | None, limit: int) -> MemoryList:
        params: dict[str, str | int] = {"limit": limit}
        if query:
            params["q"] = query
        response = await self._send("GET", "/v1/memories", params=params)
        return MemoryList.model_validate(response.json())

    async def delete(self, memory_id: str) -> None:
        await self._send("DELETE", f"/v1/memories/{quote(memory_id, safe='')}")

    async def purge(self, user: str, tenant: str | None) -> MemoriesPurged:
        params = {"tenant": tenant} if tenant else {}
        path = f"/v1/admin/memories/{quote(user, safe='')}"
        response = await self._send("DELETE", path, params=params)
        return MemoriesPurged.model_validate(response.json())


@memories_app.command("list")
def memories_list(
    query: Annotated[
        str | None, typer.Option("--query", "-q", help="Only memories with these words.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=200)] = 50,
) -> None:
    """Your memories, newest first: the fact, where it came from, when."""

    async def main() -> None:
        async with keel_api(MemoryClient) as (client, _):
            found = await client.memories(query, limit)
        if not found.memories:
            console.print("No memories: agents with `memory: true` remember what you state.")
            return
        for m in found.memories:
            source = f"run {m.source_run_id}"
            if m.source_session_id:
                source = f"session {m.source_session_id}, {source}"
            updated = m.updated_at.isoformat(timespec="seconds")
            console.print(Text(f"{m.id}  {m.kind}  {updated}  {source}", style="dim"))
            # The fact is what a model wrote: shown as text, never as markup.
            console.print(Text(f"  {m.fact}"))

    run_command(main())


@memories_app.command("delete")
def memories_delete(memory_id: str) -> None:
    """Forget one of your memories; no later run recalls it."""

    async def main() -> None:
        async with keel_api(MemoryClient) as (client, _):
            await client.delete(memory_id)
        console.print(f"Memory {memory_id} deleted.")

    run_command(main())


@memories_app.command("purge")
def memories_purge(
    user: Annotated[str, typer.Argument(help="The user's subject (`sub`).")],
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Their tenant (default: yours).")
    ] = None,
) -> None:
    """Forget every memory of a user (needs keel:admin; audited)."""

    async def main() -> None:
        async with keel_api(MemoryClient) as (client, _):
            purged = await client.purge(user, tenant)
        console.print(
            f"Deleted {purged.deleted} memories of {purged.user} in tenant {purged.tenant_id}."
        )

    run_command(main())
