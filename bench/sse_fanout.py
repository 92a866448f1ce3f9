"""SSE fan-out: one busy run streamed live to many subscribers at once.

    .venv/bin/python -m bench.sse_fanout [--subscribers 100] [--steps 200]

Starts a Temporal dev server, a fresh Postgres database, the scripted LLM, a
worker and the API, all in this process on 127.0.0.1. A run of `--steps` tiny
`read_file` steps (no LLM delay) is created, `--subscribers` clients open
`GET /v1/runs/{id}/events/stream` and wait until subscribed, then the run
starts. Reports the time from the run's start to each subscriber's first event
(median and p99), sustained durable events per second per subscriber and in
total, and whether every subscriber got every stored event once and in order.
A warm-up run without subscribers first gives the run's own pace for comparison.
Everything shares one event loop, so the figures include the clients' own work.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import httpx
from temporalio.client import Client

from bench.step_overhead import (
    DEFAULT_ADMIN_URL,
    MODEL,
    PROMPT,
    BenchError,
    fresh_database,
    review_agent,
    scratch_workspace,
    script,
)
from keel.activities.store.records import NewRun
from keel.activities.store.run_store import Store, StoreUnavailable
from keel.api.cli.local_stack import serve_api
from keel.api.identity.auth import dev_token
from keel.worker.config.settings import Settings, settings_from
from keel.worker.dev_stack import StackError, TemporalDevServer, free_port
from keel.worker.runtime import build_worker
from keel.worker.scripted.llm import ScriptedLLMServer
from keel.worker.temporal_client import connect
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.agent_spec import AgentSpec
from keel.workflows.run.models import RunInput

MAX_SUBSCRIBERS = 1000
MAX_STEPS = 500
SUBSCRIBE_TIMEOUT_S = 30.0
RUN_TIMEOUT_S = 60.0
RUN_TIMEOUT_PER_STEP_S = 1.0
JWT_SECRET = "bench-secret-0123456789abcdef0123456789abcdef"


@dataclass
class Subscriber:
    """What one client received: durable events as (seq, type, seconds since the run started)."""

    events: list[tuple[int, str, float]] = field(default_factory=list)
    deltas: int = 0
    subscribed: asyncio.Event = field(default_factory=asyncio.Event)
    error: str | None = None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.sse_fanout",
        description="One run streamed over SSE to many concurrent subscribers.",
    )
    parser.add_argument("--subscribers", type=int, default=100, help="SSE clients (default 100)")
    parser.add_argument("--steps", type=int, default=200, help="tool steps (default 200)")
    args = parser.parse_args(argv)
    if not 1 <= args.subscribers <= MAX_SUBSCRIBERS:
        parser.error(f"--subscribers must be between 1 and {MAX_SUBSCRIBERS}.")
    if not 1 <= args.steps <= MAX_STEPS:
        parser.error(f"--steps must be between 1 and {MAX_STEPS}.")
    try:
        asyncio.run(bench(args.subscribers, args.steps))
    except (BenchError, StackError, StoreUnavailable) as exc:
        raise SystemExit(f"sse_fanout: {exc}") from None


async def bench(subscribers: int, steps: int) -> None:
    admin_url = Settings().database_url or DEFAULT_ADMIN_URL
    run_timeout_s = RUN_TIMEOUT_S + RUN_TIMEOUT_PER_STEP_S * steps
    with tempfile.TemporaryDirectory(prefix="keel-bench-") as tmp:
        root = Path(tmp)
        scratch_workspace(root / "project", lines=steps)
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
                        # Field names, not environment names: Settings.model_validate
                        # would silently ignore most of them.
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
                            api_host="127.0.0.1",
                            api_port=free_port(),
                            jwt_secret=JWT_SECRET,
                        )
                        client = await connect(temporal.address)
                        parts = build_worker(client, store, settings)
                        try:
                            async with parts.worker, serve_api(settings) as url:
                                spec = review_agent(steps)
                                async with asyncio.timeout(run_timeout_s):
                                    alone_s = await run_alone(client, store, settings, spec, root)
                                async with asyncio.timeout(run_timeout_s + SUBSCRIBE_TIMEOUT_S):
                                    report = await fan_out(
                                        client, store, settings, spec, root, url, subscribers
                                    )
                        finally:
                            await parts.llm.close()
                finally:
                    await store.close()
        finally:
            await temporal.stop()
    print_report(subscribers, steps, alone_s, report)


async def create_run(store: Store, settings: Settings, workspace: Path) -> str:
    """The run's row, as the API writes it before starting the workflow."""
    run_id = f"run-bench-{uuid.uuid4().hex[:10]}"
    await store.create_run(
        NewRun(
            run_id=run_id,
            tenant_id="default",
            agent="review",
            model=settings.model,
            requester="anonymous",
            trigger="api",
            workspace=str(workspace),
            input=PROMPT,
        )
    )
    return run_id


async def start_and_finish(
    client: Client, settings: Settings, spec: AgentSpec, workspace: Path, run_id: str
) -> None:
    handle = await client.start_workflow(
        AgentRunWorkflow.run,
        RunInput(
            run_id=run_id,
            agent=spec,
            input=PROMPT,
            model=settings.model,
            workspace=str(workspace),
            llm_max_attempts=settings.llm_max_attempts,
        ),
        id=run_id,
        task_queue=settings.task_queue,
        execution_timeout=timedelta(seconds=RUN_TIMEOUT_S + RUN_TIMEOUT_PER_STEP_S * 500),
    )
    result = await handle.result()
    if result.status != "completed":
        raise BenchError(f"The run ended {result.status}: {result.error}.")


async def run_alone(
    client: Client, store: Store, settings: Settings, spec: AgentSpec, root: Path
) -> float:
    """A warm-up run nobody watches; its duration is the run's own pace."""
    run_id = await create_run(store, settings, root / "project")
    started = time.perf_counter()
    await start_and_finish(client, settings, spec, root / "project", run_id)
    return time.perf_counter() - started


@dataclass
class FanOut:
    run_s: float
    stored: list[tuple[int, str]]
    subscribers: list[Subscriber]
    replay_s: float
    """Time for every subscriber to stream the finished run's whole backlog at once."""
    replayed: list[Subscriber]


async def fan_out(
    client: Client,
    store: Store,
    settings: Settings,
    spec: AgentSpec,
    root: Path,
    url: str,
    count: int,
) -> FanOut:
    run_id = await create_run(store, settings, root / "project")
    token = dev_token(JWT_SECRET, "default", "bench")
    subscribers = [Subscriber() for _ in range(count)]
    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=count + 10)
    started = 0.0
    async with httpx.AsyncClient(
        base_url=url,
        headers={"authorization": f"Bearer {token}"},
        timeout=httpx.Timeout(RUN_TIMEOUT_S),
        limits=limits,
    ) as http:

        def since_start() -> float:
            return time.perf_counter() - started

        tasks = [asyncio.create_task(listen(http, run_id, s, since_start)) for s in subscribers]
        try:
            async with asyncio.timeout(SUBSCRIBE_TIMEOUT_S):
                await asyncio.gather(*(s.subscribed.wait() for s in subscribers))
            started = time.perf_counter()
            await start_and_finish(client, settings, spec, root / "project", run_id)
            run_s = since_start()
            await asyncio.gather(*tasks)
            # Then the same number of clients replay the finished run from its backlog.
            replayed = [Subscriber() for _ in range(count)]
            started = time.perf_counter()
            tasks = [asyncio.create_task(listen(http, run_id, s, since_start)) for s in replayed]
            await asyncio.gather(*tasks)
            replay_s = since_start()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    stored: list[tuple[int, str]] = []
    after = 0
    while page := await store.list_events(run_id, after=after, limit=1000):
        stored += [(e.seq, e.type) for e in page]
        after = page[-1].seq
    return FanOut(
        run_s=run_s,
        stored=stored,
        subscribers=subscribers,
        replay_s=replay_s,
        replayed=replayed,
    )


async def listen(
    http: httpx.AsyncClient, run_id: str, subscriber: Subscriber, clock: Callable[[], float]
) -> None:
    """Read one stream to its end, noting when each durable event arrived."""
    event: str | None = None
    seq: int | None = None
    try:
        async with http.stream("GET", f"/v1/runs/{run_id}/events/stream") as response:
            if response.status_code != 200:
                raise BenchError(f"The stream answered {response.status_code}.")
            async for line in response.aiter_lines():
                if line.startswith(":"):
                    subscriber.subscribed.set()  # the first comment comes once subscribed
                elif line.startswith("event:"):
                    event = line.removeprefix("event:").strip()
                elif line.startswith("id:"):
                    seq = int(line.removeprefix("id:"))
                elif not line and event is not None:
                    if seq is None:
                        subscriber.deltas += 1
                    else:
                        subscriber.events.append((seq, event, clock()))
                    event, seq = None, None
    except (httpx.HTTPError, BenchError) as exc:
        subscriber.error = str(exc) or type(exc).__name__
        subscriber.subscribed.set()


def print_report(subscribers: int, steps: int, alone_s: float, report: FanOut) -> None:
    stored = report.stored
    complete = [s for s in report.subscribers if _seqs(s) == stored]
    received = [s for s in report.subscribers if s.events]
    first = sorted(s.events[0][2] for s in received)
    rates = [
        (len(s.events) - 1) / (s.events[-1][2] - s.events[0][2])
        for s in received
        if len(s.events) > 1 and s.events[-1][2] > s.events[0][2]
    ]
    last = max((s.events[-1][2] for s in received), default=float("nan"))
    errors = [s.error for s in report.subscribers + report.replayed if s.error]
    print(
        f"{steps} read_file steps, {len(stored)} durable events; "
        f"{subscribers} SSE subscribers, all in one process on 127.0.0.1"
    )
    rows = [
        ("run alone (warm-up, nobody streaming)", f"{alone_s:.2f} s"),
        (f"run with {subscribers} subscribers", f"{report.run_s:.2f} s"),
        ("last subscriber got `done` after", f"{last:.2f} s"),
        ("first event, median", _ms(statistics.median(first)) if first else "n/a"),
        ("first event, p99", _ms(_p99(first)) if first else "n/a"),
        (
            "durable events/s per subscriber, median",
            f"{statistics.median(rates):,.0f}" if rates else "n/a",
        ),
        ("durable events/s, all subscribers", f"{sum(rates):,.0f}" if rates else "n/a"),
        ("message_delta events per subscriber", f"{_mean(s.deltas for s in received):.1f}"),
        ("every event once and in order", f"{len(complete)}/{subscribers} subscribers"),
        (f"replay of the finished run to {subscribers} at once", f"{report.replay_s:.2f} s"),
        (
            "durable events/s, replay, all subscribers",
            f"{sum(len(s.events) for s in report.replayed) / report.replay_s:,.0f}",
        ),
        (
            "replay: every event once and in order",
            f"{sum(1 for s in report.replayed if _seqs(s) == stored)}/{subscribers} subscribers",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    for error in sorted(set(errors))[:5]:
        print(f"  error: {error}")


def _seqs(subscriber: Subscriber) -> list[tuple[int, str]]:
    return [(seq, type_) for seq, type_, _ in subscriber.events]


def _p99(values: list[float]) -> float:
    return values[min(len(values) - 1, int(0.99 * len(values)))]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def _mean(values: Iterable[int]) -> float:
    items = list(values)
    return sum(items) / len(items) if items else 0.0


if __name__ == "__main__":
    main()
