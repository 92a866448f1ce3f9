"""How long a read of a running run takes while it works through fast steps.

A chain of fast model calls and reads runs as local activities inside long workflow
tasks; a query would wait behind them (1.75-1.9 s about every 2 s before reads
learned to answer from Postgres). This starts such a run, reads it 200 times over
`GET /v1/runs/{id}` while it runs, and prints the latency percentiles.

    .venv/bin/python -m bench.live_reads            # --reads 200 --steps 400

Everything runs on 127.0.0.1, as `bench.step_overhead` sets it up (a dev server, a
scratch database on the Postgres of DATABASE_URL, the scripted LLM, a worker and
the API in this process, authentication off).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from bench.step_overhead import (
    DEFAULT_ADMIN_URL,
    MODEL,
    fresh_database,
    review_agent,
    scratch_workspace,
    script,
)
from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings, environment_of, settings_from
from keel.worker.dev_stack import TemporalDevServer, free_port
from keel.worker.scripted.llm import ScriptedLLMServer
from keel.worker.temporal_client import connect
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.models import RunInput

WORKER_FIELDS = (
    "temporal_address",
    "database_url",
    "openai_base_url",
    "openai_api_key",
    "model",
    "task_queue",
    "workspace_root",
    "data_dir",
    "llm_max_attempts",
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args(argv)
    asyncio.run(bench(args.reads, args.steps))


async def bench(reads: int, steps: int) -> None:
    admin_url = Settings().database_url or DEFAULT_ADMIN_URL
    with tempfile.TemporaryDirectory(prefix="keel-bench-") as tmp:
        root = Path(tmp)
        workspace = scratch_workspace(root / "project", lines=steps)
        temporal = TemporalDevServer(
            db_file=root / "temporal.sqlite", port=free_port(), log_file=root / "temporal.log"
        )
        await temporal.start()
        try:
            async with fresh_database(admin_url) as database_url:
                store = await Store.open(database_url)
                try:
                    await store.migrate()
                    with ScriptedLLMServer(script(steps)) as llm:
                        settings = settings_from(
                            temporal_address=temporal.address,
                            database_url=database_url,
                            openai_base_url=llm.base_url,
                            openai_api_key="bench-key",
                            model=MODEL,
                            task_queue=f"keel-bench-{uuid.uuid4().hex[:8]}",
                            data_dir=root / "data",
                            workspace_root=root,
                            llm_max_attempts=1,
                            auth_mode="off",
                            api_port=free_port(),
                        )
                        latencies, busy = await measure(store, settings, workspace, reads, steps)
                finally:
                    await store.close()
        finally:
            await temporal.stop()
    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(f"live reads: {len(ms)} reads of a run of {steps} fast steps ({busy} while it ran)")
    print(
        f"  p50 {statistics.median(ms):.1f} ms   p99 {p99:.1f} ms   max {ms[-1]:.1f} ms"
        f"   (target: p99 < 100 ms)"
    )


async def measure(
    store: Store, settings: Settings, workspace: Path, reads: int, steps: int
) -> tuple[list[float], int]:
    client = await connect(settings.temporal_address or "")
    # The worker in its own process, as deployed: in this one it would share the GIL
    # with the API and the reads would measure that instead.
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "keel.api.cli.main",
        "worker",
        env={**os.environ, **environment_of(settings, *WORKER_FIELDS)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    run_id = f"bench-reads-{uuid.uuid4().hex[:8]}"
    latencies: list[float] = []
    busy = 0
    try:
        async with serve_api(settings) as url:
            handle = await client.start_workflow(
                AgentRunWorkflow.run,
                RunInput(
                    run_id=run_id,
                    agent=review_agent(steps),
                    input="Review this project.",
                    model=MODEL,
                    workspace=str(workspace),
                    llm_max_attempts=1,
                    fast_model=True,
                ),
                id=run_id,
                task_queue=settings.task_queue,
            )
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                for _ in range(3000):  # until the first step has recorded the run
                    if (await http.get(f"/v1/runs/{run_id}")).status_code != 404:
                        break
                    await asyncio.sleep(0.01)
                for _ in range(reads):
                    t0 = time.perf_counter()
                    response = await http.get(f"/v1/runs/{run_id}")
                    latencies.append(time.perf_counter() - t0)
                    response.raise_for_status()
                    busy += response.json()["status"] in ("queued", "running")
                    await asyncio.sleep(0.005)
            await handle.result()
    finally:
        worker.terminate()
        await asyncio.wait_for(worker.wait(), timeout=30)
    return latencies, busy


if __name__ == "__main__":
    main()
