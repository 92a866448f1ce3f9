"""`keel dev`: the whole stack in this process, and the banner that says where it is."""

from __future__ import annotations

import asyncio
import signal
from typing import Annotated

import typer
from rich.console import Console

from keel.api.cli.console_link import console_link
from keel.api.cli.local_stack import StackInfo, local_stack
from keel.api.cli.model_choice import SCRIPTED
from keel.worker.config.masking import MaskingSetupError
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import StackError

console = Console()
err_console = Console(stderr=True)


def print_stack(info: StackInfo) -> None:
    """Where each part runs, which model it talks to, and the console's sign-in link."""
    s = info.settings
    console.print(f"[bold]Keel[/bold] API        {info.api_url}  (docs at {info.api_url}/docs)")
    console.print(f"     Temporal   {s.temporal_address}")
    if info.temporal_ui:
        console.print(f"     Temporal UI {info.temporal_ui}")
    db = (
        "embedded Postgres in " + str(s.data_dir / "postgres")
        if "host=/" in (s.database_url or "")
        else "DATABASE_URL"
    )
    console.print(f"     Database   {db}")
    console.print(f"     Data dir   {s.data_dir}")
    console.print(f"     Workspaces under {s.workspace_root}")
    model = info.model.banner() if info.model else [f"{s.model} at {s.openai_base_url}"]
    for label, line in zip(["Model", *[""] * len(model)], model, strict=False):
        console.print(f"     {label:<10} {line}", highlight=False, markup=False, soft_wrap=True)
    link = console_link(s, info.api_url)
    # soft_wrap keeps the long link on one line, so it stays clickable.
    console.print(f"     Console    {link}", soft_wrap=True, highlight=False)
    if "#signin=" in link:
        console.print("                (signs this browser in as the local user; valid 15 min)")


def dev(
    no_ui: Annotated[
        bool, typer.Option("--no-ui", help="Do not serve the Temporal Web UI.")
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            help=f"Default model of this Keel; `{SCRIPTED}`: the offline scripted model "
            "(the default when no model is configured)."
        ),
    ] = None,
) -> None:
    """Start the whole stack here: Temporal, Postgres, the worker and the API."""
    settings = Settings()

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with local_stack(
            settings, reuse_running=False, ui=not no_ui, choose_model=True, model=model
        ) as info:
            print_stack(info)
            console.print("Ready. Ctrl-C stops everything.")
            await stop.wait()
            console.print("Stopping…")

    try:
        asyncio.run(main())
    except (StackError, MaskingSetupError) as exc:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(code=1) from None
