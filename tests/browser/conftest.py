"""Browser tests: the console in Debian's headless Chromium, driven by Playwright, against a
real API, worker, Temporal dev server and Postgres with the scripted model."""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.api.cli.console_link import console_link
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer
from tests.conftest import CHROMIUM, in_process_worker, token_for

# No internet here: without these Chromium's background connections fail noisily.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(os.environ.get("KEEL_SCREENSHOT_DIR", "build/console-screenshots"))

pytestmark = pytest.mark.browser

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]


@dataclass
class Console:
    """A running API + worker for one test, and what a browser needs to reach it."""

    url: str
    settings: Settings
    llm: ScriptedLLMServer
    workspace: Path
    link: str
    errors: list[str] = field(default_factory=list)

    def token(self, tenant: str = "default", sub: str = "alice", *scopes: str) -> str:
        return token_for(tenant, sub, *scopes)


@pytest.fixture
def console_stack(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> Callable[..., object]:
    """`async with console_stack(script) as c:` — the API and a worker on a fresh queue."""

    @asynccontextmanager
    async def start(script: Script, **overrides: object) -> AsyncIterator[Console]:
        llm = scripted(script)
        settings = settings_for(llm, workspace, api_port=free_port(), **overrides)
        async with in_process_worker(temporal_client, store, settings), serve_api(settings) as url:
            yield Console(
                url=url,
                settings=settings,
                llm=llm,
                workspace=workspace,
                link=console_link(settings, url),
            )

    return start


@pytest.fixture
async def page(tmp_path: Path) -> AsyncIterator[object]:
    """A fresh browser (own profile, so own cookies) with its console errors collected."""
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.async_api import async_playwright

    profile = tmp_path / f"chromium-{uuid.uuid4().hex[:6]}"
    async with async_playwright() as pw:
        context = await pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
            timezone_id="UTC",
        )
        page = context.pages[0] if context.pages else await context.new_page()
        page.set_default_timeout(20_000)
        page.script_errors = []  # type: ignore[attr-defined]
        page.on("pageerror", lambda exc: page.script_errors.append(str(exc)))  # type: ignore[attr-defined]
        yield page
        await context.close()
    shutil.rmtree(profile, ignore_errors=True)


async def screenshot(page: object, name: str) -> Path:
    """Save a full-page screenshot under build/console-screenshots (KEEL_SCREENSHOT_DIR)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
    return path


async def pending(
    http: Any, run_id: str, *, headers: dict[str, str], seen: set[str] | None = None
) -> list[dict[str, Any]]:
    """Wait for a pending interaction of the run that is not among `seen`."""
    for _ in range(600):
        items = (await http.get(f"/v1/runs/{run_id}/interactions", headers=headers)).json()
        waiting = [i for i in items if i["status"] == "pending" and i["id"] not in (seen or ())]
        if waiting:
            return waiting
        await asyncio.sleep(0.05)
    raise AssertionError(f"{run_id} never had a pending interaction")


async def finished(http: Any, run_id: str, *, headers: dict[str, str]) -> dict[str, Any]:
    for _ in range(1200):
        run: dict[str, Any] = (await http.get(f"/v1/runs/{run_id}", headers=headers)).json()
        if run["status"] in ("completed", "failed", "cancelled"):
            return run
        await asyncio.sleep(0.05)
    raise AssertionError(f"{run_id} did not finish")
