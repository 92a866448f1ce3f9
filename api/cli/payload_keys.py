"""`keel keys`: keys for encrypted payloads (KEEL_PAYLOAD_KEYS)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated

import typer

from worker.payload_codec import new_key

keys_app = typer.Typer(help="Keys that encrypt what Keel stores in Temporal.", no_args_is_help=True)


@keys_app.command("new")
def keys_new(
    key_id: Annotated[
        str | None, typer.Option("--id", help="The key's id; default: this month, e.g. 2026-12.")
    ] = None,
) -> None:
    """Print a fresh 256-bit key as a KEEL_PAYLOAD_KEYS entry, to add to the others."""
    name = key_id or datetime.now(UTC).strftime("%Y-%m")
    typer.echo(json.dumps({name: new_key()}))
