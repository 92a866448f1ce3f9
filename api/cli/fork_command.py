"""`keel fork RUN_ID --step N [--message TEXT]`: a new run from a run's conversation up
to and including one of its steps (POST /v1/runs/{id}/fork; docs/forks.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from keel.api.cli.client import KeelClient
from keel.api.cli.command_errors import run_command
from keel.api.cli.connection import keel_api
from keel.api.cli.request_body import request_body
from keel.api.core.schemas.forks import ForkCreate

__all__ = ["fork"]

console = Console()


def fork(
    run_id: Annotated[str, typer.Argument(help="The run to fork.")],
    step: Annotated[
        int,
        typer.Option(
            "--step",
            help="The last step kept: one model call and its tool results (0: the task only).",
        ),
    ],
    message: Annotated[
        str | None,
        typer.Option("--message", help="A user message the fork reads after the kept steps."),
    ] = None,
    replace: Annotated[
        bool,
        typer.Option("--replace", help="The message replaces the run's task instead."),
    ] = False,
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            help="Run the fork on this directory instead (e.g. a git worktree of the "
            "commit `keel runs show` names for the fork).",
        ),
    ] = None,
) -> None:
    """Fork a run at a step: a new run (same agent, model, workspace) starts from its
    conversation up to that step; the original is left as it is. Files its tools wrote
    and commands they ran are not undone."""
    body = request_body(
        ForkCreate,
        flags={"message": "--message", "replace_message": "--replace", "workspace": "--workspace"},
        step=step,
        message=message,
        replace_message=replace,
        workspace=str(workspace.expanduser().resolve()) if workspace is not None else None,
        trigger="cli",
    )

    async def main() -> None:
        async with keel_api(KeelClient) as (client, _):
            run = await client.fork(run_id, body)
        # One line whatever the terminal's width, for scripts that read the new id.
        line = f"Run {run.id} ({run.agent}) forked from {run.forked_from} at step "
        console.print(
            escape(f"{line}{run.forked_at_step}: {run.status}"), highlight=False, soft_wrap=True
        )
        if run.forked_tree:
            console.print(escape(f"Its files then: git commit {run.forked_tree}"), soft_wrap=True)
        console.print(escape(f"Follow it with: keel runs show {run.id}"), soft_wrap=True)

    run_command(main())
