"""How a CLI command ends on a refusal: the sentence on stderr, exit code 1, no traceback.

One place for every command group, so `keel runs`, `keel schedules` and the rest word a
refused request, an unreachable stack or a misconfigured cluster the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import typer
from rich.console import Console

from keel.api.cli.client import KeelApiError
from keel.worker.cluster_check import ClusterSetupError
from keel.worker.config.masking import MaskingSetupError
from keel.worker.dev_stack import StackError

err_console = Console(stderr=True)


def fail(message: str) -> typer.Exit:
    """Print `error: message` and give the exit to raise."""
    err_console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code=1)


def run_command(coro: Coroutine[Any, Any, object]) -> None:
    """Run a command's coroutine; what Keel refuses or cannot reach ends it with `fail`."""
    try:
        asyncio.run(coro)
    except (KeelApiError, StackError, ClusterSetupError, MaskingSetupError) as exc:
        raise fail(str(exc)) from None
