"""`keel secret RUN INTERACTION`: give a secret a run asks for, never on the command line.

The value is read from a terminal prompt that does not echo it, or from stdin when it
is piped in (`keel secret RUN IA < token.txt`), so it lands in no shell history or
process list; it goes to the API in the request body, which keeps it sealed.
"""

from __future__ import annotations

import getpass
import sys
from typing import Annotated

import typer
from rich.console import Console

from keel.api.cli.client import KeelClient
from keel.api.cli.command_errors import fail, run_command
from keel.api.cli.connection import keel_api

__all__ = ["secret_command"]

console = Console()


def secret_command(
    run_id: str,
    interaction_id: str,
    reject: Annotated[
        bool, typer.Option("--reject", help="Decline to give it; the run goes on without.")
    ] = False,
) -> None:
    """Give the secret a run asks for (a prompt on a terminal, else stdin; never argv)."""
    value = None if reject else read_secret()

    async def main() -> None:
        async with keel_api(KeelClient) as (client, _):
            if value is None:
                result = await client.decide_reject(run_id, interaction_id)
            else:
                result = await client.give_secret(run_id, interaction_id, value)
        console.print(f"{interaction_id}: {result.status}, now {result.interaction.status}")

    run_command(main())


def read_secret() -> str:
    if sys.stdin.isatty():
        value = getpass.getpass("Secret (not shown): ")
    else:
        value = sys.stdin.read()
        value = value[:-1] if value.endswith("\n") else value
        value = value[:-1] if value.endswith("\r") else value
    if not value.strip():
        raise fail("No secret given: type it at the prompt, or pipe it in on stdin.")
    return value
