"""`keel keys`: keys for encrypted payloads (KEEL_PAYLOAD_KEYS)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated

import typer

from keel.worker.payload_codec import PayloadKeyError, check_key_id, new_key

keys_app = typer.Typer(help="Keys that encrypt what Keel stores in Temporal.", no_args_is_help=True)


@keys_app.command("new")
def keys_new(
    key_id: Annotated[
        str | None, typer.Option("--id", help="The key's id; default: this month, e.g. 2026-12.")
    ] = None,
) -> None:
    """Print a fresh 256-bit key as a KEEL_PAYLOAD_KEYS entry, to add to the others."""
    name = datetime.now(UTC).strftime("%Y-%m") if key_id is None else key_id
    try:
        check_key_id(name)  # a key Keel would refuse at start is no use printed
    except PayloadKeyError as exc:
        typer.echo(f"error: {exc} Choose another --id.", err=True)
        raise typer.Exit(code=1) from None
    typer.echo(json.dumps({name: new_key()}))
