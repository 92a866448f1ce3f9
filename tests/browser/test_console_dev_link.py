"""`keel dev` prints a console link; opening it signs the browser in as the local user."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn
from tests.browser.conftest import screenshot
from tests.integration.test_durability import worker_env

LINK = re.compile(r"Console\s+(http://\S+/console/#signin=\S+)")


@pytest.mark.slow
async def test_keel_dev_prints_a_link_that_signs_the_browser_in(
    scripted: Callable[[Script], ScriptedLLMServer],
    settings_for: Callable[..., Settings],
    workspace: Path,
    tmp_path: Path,
    page: Page,
) -> None:
    llm = scripted(Script(turns=[Turn(content="Hello from **keel dev**.")]))
    settings = settings_for(llm, workspace, data_dir=tmp_path / "dev-data")
    port = free_port()
    env = {**worker_env(settings), "KEEL_API_PORT": str(port)}
    env.pop("KEEL_JWT_SECRET", None)  # the default setup: a secret made in the data directory
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "keel.api.cli.main",
        "dev",
        "--no-ui",
        env={**env, "COLUMNS": "80"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        assert proc.stdout is not None
        printed: list[str] = []
        link = None
        async with asyncio.timeout(90):
            while link is None:
                line = (await proc.stdout.readline()).decode()
                assert line, "keel dev exited:\n" + "".join(printed)
                printed.append(line)
                if found := LINK.search(line):
                    link = found.group(1)
        assert link.startswith(f"http://127.0.0.1:{port}/console/#signin=")
        await page.goto(link)
        await expect(page.locator("#who-name")).to_have_text("local @ default")

        await page.click("#start-run summary")
        await page.select_option("#start-agent", "investigate")
        await page.fill("#start-input", "Say hello")
        await page.fill("#start-workspace", str(workspace))
        await page.click("#start-submit")
        await expect(page.locator("#report-body strong")).to_have_text("keel dev", timeout=30_000)
        await screenshot(page, "keel-dev-run")
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(proc.wait(), 20)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    assert os.path.exists(tmp_path / "dev-data" / "jwt-secret")
