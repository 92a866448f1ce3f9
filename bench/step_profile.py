"""Where a step's milliseconds go: a `review` step, and one with each optional feature on.

    .venv/bin/python -m bench.step_profile [--steps 20] [--repeat 3] [--only review,memory]

For each variant of the agent (`review`: the built-in review agent without
sub-agents; then memory, hooks, sub-agents, a budget ceiling and a nearly full
context window each turned on alone) it runs one warm-up, `--repeat` timed runs
(ms a step, nothing installed over the worker) and one metered run, over which it
counts Postgres round trips, statements and bytes (`bench.step_meters.SqlMeter`),
times every activity and workflow activation, and profiles the worker's event
loop and its workflow activations with cProfile. It prints, per variant, the
figures a step, then the CPU time a step of each of Keel's parts (under cProfile,
which about doubles them: read them against each other), then the step's SQL with
`EXPLAIN ANALYZE` of each statement. Everything runs on 127.0.0.1 as in
`bench.step_overhead`. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import platform
import pstats
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import temporalio
from psycopg.rows import dict_row

import keel.worker.runtime as runtime
from bench.step_meters import OUTSIDE, ActivationMeter, ActivityMeter, SqlMeter
from bench.step_overhead import (
    DEFAULT_ADMIN_URL,
    MODEL,
    PROMPT,
    BenchError,
    check_keel_result,
    fresh_database,
    history_bytes,
    review_agent,
    scratch_workspace,
    script,
)
from keel.activities.store.run_store import Store, StoreUnavailable
from keel.api.core.run_orders import as_started
from keel.worker.agent_catalog import AgentCatalog
from keel.worker.config.settings import Settings, settings_from
from keel.worker.dev_stack import StackError, TemporalDevServer, free_port
from keel.worker.scripted.llm import ScriptedLLMServer
from keel.worker.temporal_client import connect
from keel.workflows.gate.plugin_refs import HookRef
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.agent_spec import AgentSpec
from keel.workflows.run.models import RunInput

MAX_STEPS = 200
MAX_REPEAT = 20
PAUSE_S = 1.0
RUN_TIMEOUT_S = 120.0
# The nearly full window: the run's largest request takes this share of it.
FULL_SHARE = 0.85
MAX_ESTIMATED_SQL = "SELECT max(estimated_tokens) AS most FROM llm_calls WHERE run_id = %s"


def _memory(spec: AgentSpec, _: int) -> AgentSpec:
    return spec.model_copy(update={"memory": True})


def _hooks(spec: AgentSpec, _: int) -> AgentSpec:
    # A hook on writes only: looked up every step, never called for a read.
    guard = HookRef(plugin="bench", name="guard", event="tool.before", tools="write_*")
    return spec.model_copy(update={"hooks": [guard]})


def _subagents(spec: AgentSpec, _: int) -> AgentSpec:
    built_in = AgentCatalog.load().get("review")
    return spec.model_copy(update={"subagents": list(built_in.subagents) if built_in else []})


def _ceiling(spec: AgentSpec, _: int) -> AgentSpec:
    limits = spec.limits.model_copy(update={"max_cost_usd": 1000.0, "max_total_tokens": 10**9})
    return spec.model_copy(update={"limits": limits})


def _full_window(spec: AgentSpec, window: int) -> AgentSpec:
    return spec.model_copy(update={"context_window": window})


@dataclass(frozen=True)
class Variant:
    key: str
    label: str
    change: Callable[[AgentSpec, int], AgentSpec] | None


VARIANTS = (
    Variant("review", "review (no optional feature)", None),
    Variant("memory", "memory: true", _memory),
    Variant("hooks", "a tool.before hook (writes only)", _hooks),
    Variant("subagents", "sub-agents offered (never called)", _subagents),
    Variant("ceiling", "budget ceiling (cost and tokens)", _ceiling),
    Variant("full", f"window {FULL_SHARE:.0%} full", _full_window),
)


# (label, path suffix of the file, function name or "*" for every function of the file,
#  thread: "loop" for the event loop, "workflow" for activations)
PARTS: tuple[tuple[str, str, str, str], ...] = (
    (
        "workflow: all of its code",
        "temporalio/worker/_workflow_instance.py",
        "activate",
        "workflow",
    ),
    ("workflow: payload encode", "keel/worker/temporal_client.py", "to_payload", "workflow"),
    ("workflow: payload decode", "converter/_payload_converter.py", "from_payloads", "workflow"),
    ("workflow: gate check", "keel/workflows/gate/gate.py", "check", "workflow"),
    ("workflow: hooks lookup", "keel/workflows/gate/plugin_refs.py", "hooks_for", "workflow"),
    ("workflow: hooks (RunHooks)", "keel/workflows/run/hooks.py", "*", "workflow"),
    ("workflow: memory check", "keel/workflows/run/run_memory.py", "*", "workflow"),
    ("workflow: router", "keel/workflows/router/workflow.py", "*", "workflow"),
    ("workflow: sub-agents", "keel/workflows/run/subagent_runs.py", "*", "workflow"),
    ("workflow: budget ceiling", "keel/workflows/run/budget.py", "*", "workflow"),
    ("workflow: convergence", "keel/workflows/run/convergence.py", "*", "workflow"),
    ("workflow: step input", "keel/workflows/run/model_steps.py", "llm_step_input", "workflow"),
    ("activity llm_step (CPU)", "keel/activities/llm/step.py", "llm_step", "loop"),
    (
        "  reads: budget inputs, conversation",
        "keel/activities/store/step_reads.py",
        "before_call",
        "loop",
    ),
    ("  context budget: estimate", "keel/activities/context/budget.py", "plan", "loop"),
    ("  tool definitions", "keel/activities/tool_schemas.py", "tool_definitions", "loop"),
    ("  model call (openai, stream)", "keel/activities/llm/step.py", "_complete", "loop"),
    ("  live deltas (NOTIFY)", "keel/activities/llm/step.py", "_pump", "loop"),
    ("  coverage views", "keel/activities/store/coverage_store.py", "views_in", "loop"),
    ("  findings in the answer", "keel/workflows/run/findings.py", "extract_all", "loop"),
    ("  record the answer", "keel/activities/store/llm_call_rows.py", "record_assistant", "loop"),
    ("activity run_tool (CPU)", "keel/activities/tools/tool_activities.py", "run_tool", "loop"),
    ("  stored-answer check", "keel/activities/tools/tool_activities.py", "_stored_digest", "loop"),
    ("  the tool itself", "keel/activities/tools/tool_activities.py", "_execute", "loop"),
    ("  store the output", "keel/activities/store/message_rows.py", "answer_tool_call", "loop"),
    ("events: masking and shaping", "keel/activities/store/event_rows.py", "events_json", "loop"),
    ("events: masking (all of it)", "keel/activities/store/audit.py", "redact", "loop"),
    ("activity payload encode", "keel/worker/temporal_client.py", "to_payload", "loop"),
    ("activity payload decode", "converter/_payload_converter.py", "from_payloads", "loop"),
)


@dataclass
class Measured:
    variant: Variant
    ms_per_step: list[float]
    history_per_step: float
    activations: float
    activation_ms: float
    round_trips: dict[str, float]
    sync_points: dict[str, float]
    connects: float
    statements: dict[tuple[str, str], tuple[float, float, Any]]
    activity_ms: dict[str, tuple[float, float]]
    parts: dict[str, float] = field(default_factory=dict)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.step_profile", description=__doc__)
    parser.add_argument("--steps", type=int, default=20, help="tool steps per run (default 20)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per variant (default 3)")
    keys = [v.key for v in VARIANTS]
    parser.add_argument("--only", default="", help=f"comma-separated subset of: {','.join(keys)}")
    parser.add_argument(
        "--dump",
        type=Path,
        default=None,
        help="write each variant's two profiles here (VARIANT-loop.prof, VARIANT-workflow.prof)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.steps <= MAX_STEPS:
        parser.error(f"--steps must be between 1 and {MAX_STEPS}.")
    if not 1 <= args.repeat <= MAX_REPEAT:
        parser.error(f"--repeat must be between 1 and {MAX_REPEAT}.")
    only = [k for k in args.only.split(",") if k]
    unknown = sorted(set(only) - set(keys))
    if unknown:
        parser.error(f"--only names unknown variants {unknown}; choose from {keys}.")
    chosen = [v for v in VARIANTS if not only or v.key in only]
    try:
        asyncio.run(bench(args.steps, args.repeat, chosen, args.dump))
    except (BenchError, StackError, StoreUnavailable) as exc:
        raise SystemExit(f"step_profile: {exc}") from None


async def bench(steps: int, repeat: int, variants: list[Variant], dump: Path | None) -> None:
    admin_url = Settings().database_url or DEFAULT_ADMIN_URL
    load_start = os.getloadavg()
    sql = SqlMeter()
    activities = ActivityMeter()
    activations = ActivationMeter()
    original_interceptors = runtime.worker_interceptors
    runtime.worker_interceptors = lambda s: [*original_interceptors(s), activities]  # type: ignore[assignment]
    results: list[Measured] = []
    explained: dict[str, float | str] = {}
    with tempfile.TemporaryDirectory(prefix="keel-profile-") as tmp:
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
                            task_queue=f"keel-profile-{uuid.uuid4().hex[:8]}",
                            data_dir=root / "data",
                            workspace_root=root,
                            llm_max_attempts=1,
                        )
                        client = await connect(temporal.address)
                        parts = runtime.build_worker(client, store, settings)
                        try:
                            with sql.installed(), activations.installed():
                                async with parts.worker:
                                    window = 0
                                    for variant in variants:
                                        spec = review_agent(steps)
                                        if variant.key == "full":
                                            window = await _full_window_size(
                                                client, store, settings, spec, workspace, steps
                                            )
                                        if variant.change is not None:
                                            spec = variant.change(spec, window)
                                        results.append(
                                            await measure(
                                                client,
                                                store,
                                                settings,
                                                spec,
                                                workspace,
                                                steps,
                                                repeat,
                                                variant,
                                                (sql, activities, activations),
                                                dump,
                                            )
                                        )
                            explained = await explain_all(database_url, results[0])
                        finally:
                            await parts.llm.close()
                finally:
                    await store.close()
        finally:
            await temporal.stop()
            runtime.worker_interceptors = original_interceptors  # type: ignore[assignment]
    print_report(steps, repeat, results, explained, load_start, os.getloadavg())


async def run_once(
    client: Any, store: Store, settings: Settings, spec: AgentSpec, workspace: Path, steps: int
) -> tuple[str, float, int]:
    run_id = f"run-profile-{uuid.uuid4().hex[:10]}"
    run = RunInput(
        run_id=run_id,
        agent=spec,
        input=PROMPT,
        model=settings.model,
        workspace=str(workspace),
        llm_max_attempts=settings.llm_max_attempts,
    )
    started = time.perf_counter()
    handle = await client.start_workflow(
        AgentRunWorkflow.run,
        await as_started(store, run),
        id=run_id,
        task_queue=settings.task_queue,
        execution_timeout=timedelta(seconds=RUN_TIMEOUT_S),
    )
    result = await handle.result()
    seconds = time.perf_counter() - started
    check_keel_result(result, steps)
    hist = await history_bytes(
        client, run_id, handle.result_run_id or handle.first_execution_run_id
    )
    return run_id, seconds, hist


async def _full_window_size(
    client: Any, store: Store, settings: Settings, spec: AgentSpec, workspace: Path, steps: int
) -> int:
    """A window the run's largest request fills to `FULL_SHARE`, from a run without one."""
    run_id, _, _ = await run_once(client, store, settings, spec, workspace, steps)
    async with store.pool.connection() as conn:
        cur = await conn.execute(MAX_ESTIMATED_SQL, (run_id,))
        row = await cur.fetchone()
    most = int(row["most"] or 0) if row else 0
    if most <= 0:
        raise BenchError("The run recorded no token estimates; is the context budget off?")
    reserve = 4096  # the output reserve of a window this small, as `ModelWindow` keeps it
    return int(most / FULL_SHARE) + reserve


async def measure(
    client: Any,
    store: Store,
    settings: Settings,
    spec: AgentSpec,
    workspace: Path,
    steps: int,
    repeat: int,
    variant: Variant,
    meters: tuple[SqlMeter, ActivityMeter, ActivationMeter],
    dump: Path | None = None,
) -> Measured:
    sql, activities, activations = meters
    llm_calls = steps + 1
    await run_once(client, store, settings, spec, workspace, steps)  # warm-up
    timed: list[float] = []
    hist: list[int] = []
    for _ in range(repeat):
        await asyncio.sleep(PAUSE_S)
        _, seconds, size = await run_once(client, store, settings, spec, workspace, steps)
        timed.append(seconds * 1000 / llm_calls)
        hist.append(size)
    await asyncio.sleep(PAUSE_S)
    for meter in meters:
        meter.reset()
    loop_profile = cProfile.Profile()
    workflow_profile = cProfile.Profile()
    activations.profile = workflow_profile
    sql.on = activities.on = activations.on = True
    loop_profile.enable()
    try:
        await run_once(client, store, settings, spec, workspace, steps)
    finally:
        loop_profile.disable()
        sql.on = activities.on = activations.on = False
        activations.profile = None
    if dump is not None:
        _dump(dump, variant.key, loop_profile, workflow_profile)
    per = float(llm_calls)
    measured = Measured(
        variant=variant,
        ms_per_step=timed,
        history_per_step=statistics.median(hist) / llm_calls,
        activations=activations.count / per,
        activation_ms=activations.seconds * 1000 / per,
        round_trips={k: v / per for k, v in sql.round_trips.items()},
        sync_points={k: v / per for k, v in sql.sync_points().items()},
        connects=_connects(loop_profile) / per,
        statements={
            k: (s.calls / per, s.sent_bytes / per, s.sample) for k, s in sql.statements.items()
        },
        activity_ms={
            k: (activities.calls[k] / per, activities.seconds[k] * 1000 / per)
            for k in activities.seconds
        },
    )
    measured.parts = part_times(loop_profile, workflow_profile, per)
    return measured


def _connects(loop: cProfile.Profile) -> int:
    """TCP connections the event loop opened (to the model, to Postgres)."""
    stats = pstats.Stats(loop).stats  # type: ignore[attr-defined]
    return sum(
        calls
        for (_, _, function), (_, calls, *_) in stats.items()
        if function == "<method 'connect' of '_socket.socket' objects>"
    )


def _dump(where: Path, key: str, loop: cProfile.Profile, workflow: cProfile.Profile) -> None:
    where.mkdir(parents=True, exist_ok=True)
    loop.dump_stats(where / f"{key}-loop.prof")
    workflow.dump_stats(where / f"{key}-workflow.prof")


def part_times(loop: cProfile.Profile, workflow: cProfile.Profile, per: float) -> dict[str, float]:
    """CPU ms a step of each of `PARTS`, from the two profiles' cumulative times."""
    tables = {
        "loop": pstats.Stats(loop).stats,  # type: ignore[attr-defined]
        "workflow": pstats.Stats(workflow).stats,  # type: ignore[attr-defined]
    }
    out: dict[str, float] = {}
    for label, suffix, name, thread in PARTS:
        total = 0.0
        for (filename, _, function), (_, _, _, cumulative, callers) in tables[thread].items():
            if not filename.endswith(suffix) or (name != "*" and function != name):
                continue
            if name == "*" and any(caller[0].endswith(suffix) for caller in callers):
                continue  # counted in the caller of the same file
            total += cumulative
        out[label] = total * 1000 / per
    return out


async def explain_all(database_url: str, review: Measured) -> dict[str, float | str]:
    """EXPLAIN ANALYZE of each statement the plain step sent, in a transaction rolled back."""
    out: dict[str, float | str] = {}
    async with await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row) as conn:
        for (_, text), (_, _, sample) in review.statements.items():
            if sample is None or text in out:
                continue
            query, params = sample
            head = query.lstrip().split(None, 1)[0].upper()
            if head not in ("SELECT", "INSERT", "UPDATE", "WITH", "DELETE"):
                continue
            try:
                async with conn.transaction(force_rollback=True):
                    cur = await conn.execute(
                        "EXPLAIN (ANALYZE, FORMAT JSON) " + query,  # type: ignore[arg-type]
                        params,
                    )
                    row = await cur.fetchone()
                plan = row["QUERY PLAN"][0] if row else {}
                out[text] = float(plan.get("Execution Time", 0.0))
            except psycopg.Error as exc:
                out[text] = f"n/a ({type(exc).__name__})"
    return out


def print_report(
    steps: int,
    repeat: int,
    results: list[Measured],
    explained: dict[str, float | str],
    load_start: tuple[float, float, float],
    load_end: tuple[float, float, float],
) -> None:
    print(
        f"{steps} tool steps + 1 answer a run; ms/step = median of {repeat} runs (no meters), "
        f"then one metered and profiled run; figures are per model call (step)"
    )
    print(
        f"python {platform.python_version()}, temporalio {temporalio.__version__}, "
        f"psycopg {psycopg.__version__}, nproc {os.cpu_count()}; load at start "
        f"{' '.join(f'{x:.2f}' for x in load_start)}, at end "
        f"{' '.join(f'{x:.2f}' for x in load_end)}"
    )
    print()
    header = f"{'a step':<36}" + "".join(f"{r.variant.key:>10}" for r in results)
    print(header)

    def row(label: str, values: list[str]) -> None:
        print(f"{label:<36}" + "".join(f"{v:>10}" for v in values))

    row("ms (median, unmetered)", [f"{statistics.median(r.ms_per_step):.1f}" for r in results])
    row("history bytes", [f"{r.history_per_step:,.0f}" for r in results])
    row("workflow activations", [f"{r.activations:.2f}" for r in results])
    row("  their wall ms (profiled)", [f"{r.activation_ms:.2f}" for r in results])
    row("TCP connects (model, Postgres)", [f"{r.connects:.2f}" for r in results])
    row("Postgres round trips, at least", [f"{sum(r.sync_points.values()):.2f}" for r in results])
    kinds = sorted({k for r in results for k in r.sync_points})
    for kind in kinds:
        row(f"  in {kind}", [f"{r.sync_points.get(kind, 0.0):.2f}" for r in results])
    row("Postgres waits that got data", [f"{sum(r.round_trips.values()):.2f}" for r in results])
    kinds = sorted({k for r in results for k in r.round_trips})
    for kind in kinds:
        row(f"  in {kind}", [f"{r.round_trips.get(kind, 0.0):.2f}" for r in results])
    row("Postgres statements", [f"{sum(s[0] for s in r.statements.values()):.2f}" for r in results])
    row(
        "  bytes sent",
        [f"{sum(s[1] for s in r.statements.values()):,.0f}" for r in results],
    )
    row("NOTIFY statements", [f"{_notifies(r):.2f}" for r in results])
    activity_kinds = sorted({k for r in results for k in r.activity_ms})
    for kind in activity_kinds:
        row(
            f"activity {kind}: calls",
            [f"{r.activity_ms.get(kind, (0.0, 0.0))[0]:.2f}" for r in results],
        )
        row(
            "  wall ms (profiled)",
            [f"{r.activity_ms.get(kind, (0.0, 0.0))[1]:.2f}" for r in results],
        )
    print()
    print("CPU ms a step under cProfile (inflated by it; compare rows and columns)")
    print(header)
    for label, *_ in PARTS:
        row(label, [f"{r.parts.get(label, 0.0):.3f}" for r in results])
    print()
    review = results[0]
    print(
        f"SQL of a `{review.variant.key}` step: calls a step, bytes sent a step, EXPLAIN ANALYZE ms"
    )
    for (kind, text), (calls, sent, _) in sorted(
        review.statements.items(), key=lambda item: (item[0][0], -item[1][0])
    ):
        took = explained.get(text, "-")
        took_text = f"{took:.3f}" if isinstance(took, float) else took
        short = " ".join(text.split())[:90]
        where = "" if kind == OUTSIDE else kind
        print(f"  {calls:5.2f} {sent:8,.0f} B {took_text:>9}  {where:<14} {short}")


def _notifies(result: Measured) -> float:
    return sum(s[0] for (_, text), s in result.statements.items() if "notify" in text.lower())


if __name__ == "__main__":
    main()
