"""A whole Keel in one process: embedded Temporal and Postgres, the worker and the API."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import httpx
import uvicorn

from keel.api.cli.model_choice import ModelChoice, chosen_model
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import EmbeddedStack, StackError, port_in_use

log = logging.getLogger("keel.stack")


@dataclass
class StackInfo:
    """Where the parts of a running stack are."""

    api_url: str
    settings: Settings
    started_here: bool
    temporal_ui: str | None = None
    model: ModelChoice | None = None
    """The model a stack started here talks to, when the command chose one."""


async def api_is_up(url: str) -> bool:
    try:
        async with httpx.AsyncClient(timeout=2.0) as client:
            response = await client.get(f"{url}/health")
            return response.status_code == 200
    except httpx.HTTPError:
        return False


@asynccontextmanager
async def serve_api(settings: Settings) -> AsyncIterator[str]:
    """Serve the API in this process until the context exits."""
    # Imported here: a CLI command that reaches a running API never loads the app.
    from keel.api.http.app import create_app

    if port_in_use(settings.api_port):
        raise StackError(
            f"Port {settings.api_port} is taken, so the API cannot start. "
            "Set KEEL_API_PORT to a free port."
        )
    config = uvicorn.Config(
        create_app(settings),
        host=settings.api_host,
        port=settings.api_port,
        log_level="warning",
        lifespan="on",
        # Open event streams must not hold a shutdown hostage.
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    url = f"http://{settings.api_host}:{settings.api_port}"
    try:
        for _ in range(200):
            if server.started:
                break
            if task.done():
                task.result()
                raise StackError("The API stopped during start-up.")
            await asyncio.sleep(0.05)
        yield url
    finally:
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)


@asynccontextmanager
async def local_stack(
    settings: Settings,
    *,
    reuse_running: bool = True,
    ui: bool = True,
    choose_model: bool = False,
    model: str | None = None,
) -> AsyncIterator[StackInfo]:
    """Use a running API if there is one; otherwise start everything here.

    With `choose_model`, a stack started here talks to `model` or the configured one,
    or, with none configured, to the offline scripted model (`model_choice`)."""
    if reuse_running and await api_is_up(settings.resolved_api_url):
        yield StackInfo(api_url=settings.resolved_api_url, settings=settings, started_here=False)
        return
    from keel.worker.runtime import running_worker  # only a stack started here runs a worker

    async with AsyncExitStack() as stack:
        choice = stack.enter_context(chosen_model(settings, model)) if choose_model else None
        if choice is not None:
            settings = choice.settings
        embedded = await stack.enter_async_context(EmbeddedStack(settings, ui=ui))
        resolved = embedded.settings
        await stack.enter_async_context(running_worker(resolved))
        url = await stack.enter_async_context(serve_api(resolved))
        ui_url = embedded.temporal.ui_url if embedded.temporal else None
        yield StackInfo(
            api_url=url, settings=resolved, started_here=True, temporal_ui=ui_url, model=choice
        )
