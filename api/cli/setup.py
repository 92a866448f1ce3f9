"""`keel setup temporal`: make a Temporal cluster ready for Keel, or check that it is."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from datetime import timedelta
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from temporalio.client import Client
from temporalio.service import RPCError

from keel.worker.cluster_check import ClusterSetupError, check_cluster, setup_cluster
from keel.worker.config.settings import Settings
from keel.worker.temporal_client import connect

setup_app = typer.Typer(help="Prepare the services Keel runs on.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)
WAIT_EVERY_S = 2.0


async def _reached(address: str, namespace: str, wait_s: float) -> Client:
    """A client, once the server answers (a deploy starts this beside the server)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            client = await connect(address, namespace)
            await client.service_client.check_health()
            return client
        except (RuntimeError, RPCError):
            if time.monotonic() >= deadline:
                raise
        await asyncio.sleep(WAIT_EVERY_S)


@setup_app.command("temporal")
def setup_temporal(
    check: Annotated[
        bool,
        typer.Option("--check", help="Only report what is missing; exit 1 if anything is."),
    ] = False,
    retention_days: Annotated[
        int,
        typer.Option(
            "--retention-days", min=1, help="Retention of a namespace this creates, in days."
        ),
    ] = 7,
    wait_s: Annotated[
        float,
        typer.Option(
            "--wait", min=0, help="Seconds to wait for a Temporal that is still starting."
        ),
    ] = 60,
) -> None:
    """Create TEMPORAL_NAMESPACE if it is missing and register Keel's search attributes
    (idempotent: run it before every deploy). Needs TEMPORAL_ADDRESS."""
    settings = Settings()
    if settings.temporal_address is None:
        err_console.print("[red]error:[/red] keel setup temporal needs TEMPORAL_ADDRESS.")
        raise typer.Exit(code=1)
    address, namespace = settings.temporal_address, settings.temporal_namespace

    async def main() -> bool:
        client = await _reached(address, namespace, wait_s)
        if check:
            report = await check_cluster(client)
            (console if report.ok else err_console).print(report.sentence())
            return report.ok
        done = await setup_cluster(client, retention=timedelta(days=retention_days))
        for line in done or [f"Namespace '{namespace}' at {address} is ready for Keel."]:
            console.print(line)
        return True

    try:
        ok = asyncio.run(main())
    except ClusterSetupError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        _leave(1)
    except RPCError as exc:
        err_console.print(
            f"[red]error:[/red] Temporal at {address} refused ({exc.status.name}): {exc.message}"
        )
        _leave(1)
    except RuntimeError as exc:  # the client could not connect
        err_console.print(f"[red]error:[/red] Temporal at {address} did not answer: {exc}")
        _leave(1)
    _leave(0 if ok else 1)


def _leave(code: int) -> NoReturn:
    """End the process now, its output flushed. Temporal's client runtime keeps threads of
    its own, and at the interpreter's shutdown one could abort it ("Fatal Python error:
    PyGILState_Release", exit -6) after the setup had finished: one run in three here."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
