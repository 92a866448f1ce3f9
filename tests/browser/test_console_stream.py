"""A run's timeline survives a dropped event stream: the API restarts mid-run, the browser
reconnects with Last-Event-ID, and every event shows exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Page, expect
from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.api.cli.console_link import console_link
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from tests.browser.conftest import finished, screenshot
from tests.browser.test_console_runs import sign_in_with_link
from tests.conftest import auth_headers, in_process_worker

LOCAL = auth_headers("default", "local")


@pytest.mark.realtime
async def test_a_dropped_stream_resumes_without_duplicates(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: Callable[[Script], ScriptedLLMServer],
    settings_for: Callable[..., Settings],
    page: Page,
) -> None:
    files = [f"notes/f{i}.txt" for i in range(10)]
    (workspace / "notes").mkdir()
    for i, name in enumerate(files):
        (workspace / name).write_text(f"file {i}\n")
    turns = [
        Turn(tool_calls=[ScriptedToolCall(name="read_file", arguments={"path": name})], delay_s=1.2)
        for name in files
    ]
    llm = scripted(Script(turns=[*turns, Turn(content="Read them all.")]))
    settings = settings_for(llm, workspace, api_port=free_port())
    async with in_process_worker(temporal_client, store, settings):
        async with serve_api(settings) as url:
            await sign_in_with_link(page, console_link(settings, url))
            async with httpx.AsyncClient(base_url=url) as http:
                created = await http.post(
                    "/v1/runs",
                    headers=LOCAL,
                    json={"agent": "investigate", "input": "Read", "workspace": str(workspace)},
                )
                run_id = created.json()["id"]
            await page.goto(f"{url}/console/runs/{run_id}")
            timeline = page.locator("ol.timeline")
            await expect(timeline.locator(".ev-tool_call")).to_have_count(1, timeout=20_000)
            await expect(page.locator(".stream-state")).to_have_attribute("data-state", "live")
        # The API is gone: the stream drops while the worker carries on.
        await expect(page.locator(".stream-state")).to_have_attribute("data-state", "reconnecting")
        await asyncio.sleep(1.5)
        async with serve_api(settings) as url, httpx.AsyncClient(base_url=url) as http:
            await expect(timeline.locator(".ev-done")).to_be_visible(timeout=60_000)
            run = await finished(http, run_id, headers=LOCAL)
            assert run["status"] == "completed"
            events = (await http.get(f"/v1/runs/{run_id}/events", headers=LOCAL)).json()
            seqs = [e["seq"] for e in events["events"]]
            shown: list[Any] = await page.eval_on_selector_all(
                "ol.timeline [data-seq]", "els => els.map(e => Number(e.dataset.seq))"
            )
            assert len(shown) == len(set(shown)), "an event was shown twice"
            assert set(shown) <= set(seqs)
            assert await timeline.get_attribute("data-count") == str(len(seqs))
            assert await timeline.get_attribute("data-last-seq") == str(seqs[-1])
            assert int(await timeline.get_attribute("data-reconnects") or 0) >= 1
            await expect(timeline.locator(".ev-tool_call")).to_have_count(len(files))
            await screenshot(page, "run-resumed")
