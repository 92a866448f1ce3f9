"""Reads of a running run answer at once, even while a step holds the workflow busy."""

from __future__ import annotations

import time
from pathlib import Path

from temporalio.client import Client

from keel.worker.scripted.llm import Script, Turn
from tests.integration.conftest import LaunchKeel
from tests.integration.keel_http import StartLLM, settings_of
from tests.integration.runs import start_run

STEP_S = 3.0


async def test_reads_do_not_wait_for_the_step_in_flight(
    temporal_client: Client, workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    # A fast model's call runs as a local activity, inside the workflow task: a query
    # would wait until the call ends.
    llm = scripted(Script(turns=[Turn(content="Slow answer.", delay_s=STEP_S)]))
    async with keel_app(llm) as http:
        handle = await start_run(temporal_client, settings_of(http), workspace, fast_model=True)
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
