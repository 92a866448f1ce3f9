"""Reads of a running run answer at once, even while a step holds the workflow busy."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn
from tests.conftest import auth_headers, in_process_worker
from tests.integration.runs import start_run

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
STEP_S = 3.0


async def test_reads_do_not_wait_for_the_step_in_flight(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    # A fast model's call runs as a local activity, inside the workflow task: a query
    # would wait until the call ends.
    llm = scripted(Script(turns=[Turn(content="Slow answer.", delay_s=STEP_S)]))
    settings = settings_for(llm, workspace, api_port=free_port())
    async with (
        in_process_worker(temporal_client, store, settings),
        serve_api(settings) as url,
        httpx.AsyncClient(base_url=url, timeout=30, headers=auth_headers()) as http,
    ):
        handle = await start_run(temporal_client, settings, workspace, fast_model=True)
        began = time.monotonic()
        while llm.total_requests == 0:  # the call is in flight from here on
            assert time.monotonic() - began < 10
            await _pause()
        slowest = 0.0
        for _ in range(5):
            t0 = time.monotonic()
            response = await http.get(f"/v1/runs/{handle.id}")
            slowest = max(slowest, time.monotonic() - t0)
            assert response.status_code == 200, response.text
            assert response.json()["status"] in ("queued", "running")
        # All five reads came back while the step was still running, each well before it.
        assert time.monotonic() - began < STEP_S - 0.5
        assert slowest < 1.0, slowest
        result = await handle.result()
    assert result.status == "completed"


async def _pause() -> None:
    import asyncio

    await asyncio.sleep(0.02)
