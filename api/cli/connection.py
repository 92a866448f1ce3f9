"""How every CLI command reaches Keel: the running API if one answers, otherwise an
embedded stack started for the command; either way a client that carries the token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar

from keel.api.cli.client import KeelClient
from keel.api.cli.local_stack import StackInfo, local_stack
from keel.api.identity.config import cli_token
from keel.worker.config.settings import Settings

ClientT = TypeVar("ClientT", bound=KeelClient)


@asynccontextmanager
async def keel_api(
    client_class: type[ClientT],
    settings: Settings | None = None,
    *,
    reuse_running: bool = True,
    ui: bool = False,
    choose_model: bool = False,
) -> AsyncIterator[tuple[ClientT, StackInfo]]:
    """A client of Keel's API and where that API runs (`started_here` if this command
    started it; with `choose_model`, offline when no model is configured)."""
    async with local_stack(
        settings or Settings(), reuse_running=reuse_running, ui=ui, choose_model=choose_model
    ) as info:
        client = client_class(info.api_url, token=cli_token(info.settings))
        async with client:
            yield client, info
