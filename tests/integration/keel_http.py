"""A running Keel for an integration test, reached over real HTTP, and the polls tests
use to wait for what a run does.

`keel_api` starts an in-process worker on the test's task queue and the API on the
settings' port, and yields a client for it. The polls ask the API (or a check the test
passes) until the awaited state shows, so a test waits as long as the run takes and no
longer, instead of sleeping a guess.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

import httpx
from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.scripted.llm import Script, ScriptedLLMServer
from tests.conftest import auth_headers, in_process_worker

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
LaunchKeel = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]
"""The `keel_app` fixture: `async with keel_app(script_or_llm, headers=..., **settings) as http`."""

ALICE = auth_headers("default", "alice")
BOB = auth_headers("default", "bob")
MALLORY = auth_headers("other-tenant", "mallory")
ENDED = ("completed", "failed", "cancelled")
T = TypeVar("T")
_SETTINGS: WeakKeyDictionary[httpx.AsyncClient, Settings] = WeakKeyDictionary()


def settings_of(http: httpx.AsyncClient) -> Settings:
    """The settings of the Keel a `keel_api` (or `keel_app`) client talks to: its task
    queue, for a test that starts a workflow directly; its data dir, for the CLI."""
    return _SETTINGS[http]


@asynccontextmanager
async def keel_api(
    temporal_client: Client,
    store: Store,
    settings: Settings,
    *,
    headers: dict[str, str] | None = None,
    http_timeout: float | httpx.Timeout = 30.0,
    worker: bool = True,
) -> AsyncIterator[httpx.AsyncClient]:
    """A worker for the settings' task queue (unless `worker` is False: then runs wait
    on a queue nobody serves) and the API on their port; a client of it."""
    async with AsyncExitStack() as stack:
        if worker:
            await stack.enter_async_context(in_process_worker(temporal_client, store, settings))
        url = await stack.enter_async_context(serve_api(settings))
        http = await stack.enter_async_context(
            httpx.AsyncClient(base_url=url, headers=headers, timeout=http_timeout)
        )
        _SETTINGS[http] = settings
        yield http


async def eventually(
    check: Callable[[], Awaitable[T | None]], what: str, within: float = 20, every: float = 0.05
) -> T:
    """The first answer of `check` that is neither None nor False, asked every `every`
    seconds; fails naming `what` when none came within `within` seconds."""
    deadline = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < deadline:
        found = await check()
        if found is not None and found is not False:
            return found
        await asyncio.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


async def run_reaches(
    http: httpx.AsyncClient,
    run_id: str,
    *statuses: str,
    headers: dict[str, str] | None = None,
    within: float = 60,
) -> dict[str, Any]:
    """The run as the API shows it once its status is one of `statuses` (by default any
    status a run ends in)."""
    wanted = statuses or ENDED

    async def reached() -> dict[str, Any] | None:
        response = await http.get(f"/v1/runs/{run_id}", headers=headers)
        run: dict[str, Any] = response.json() if response.status_code == 200 else {}
        return run if run.get("status") in wanted else None

    return await eventually(reached, f"run {run_id} to reach {wanted}", within=within)


async def finished(
    http: httpx.AsyncClient, run_id: str, headers: dict[str, str] = ALICE
) -> dict[str, Any]:
    """The run once it ended, read as alice unless `headers` say otherwise."""
    return await run_reaches(http, run_id, headers=headers)


async def pending(
    http: httpx.AsyncClient,
    run_id: str,
    count: int = 1,
    seen: set[str] | None = None,
    headers: dict[str, str] = ALICE,
) -> list[dict[str, Any]]:
    """Wait for `count` pending interactions not among `seen`."""

    async def waiting() -> list[dict[str, Any]] | None:
        items = (await http.get(f"/v1/runs/{run_id}/interactions", headers=headers)).json()
        found = [i for i in items if i["status"] == "pending" and i["id"] not in (seen or ())]
        return found if len(found) >= count else None

    return await eventually(waiting, f"{count} pending interactions of {run_id}", within=30)


def base_url(http: httpx.AsyncClient) -> str:
    """The API's root URL, for the protocol clients that build their own connections."""
    return str(http.base_url).rstrip("/")
