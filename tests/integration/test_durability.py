"""Runs survive a killed worker and a restarted Temporal server; history stays small."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.worker.config.settings import Settings, environment_of
from keel.worker.dev_stack import TemporalDevServer, free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.worker.temporal_client import connect
from tests.conftest import in_process_worker
from tests.integration.runs import agent, start_run

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]


def read(path: str, **extra: object) -> ScriptedToolCall:
    return ScriptedToolCall(name="read_file", arguments={"path": path, **extra})


def worker_env(settings: Settings) -> dict[str, str]:
    """What `keel worker` needs to join the test's stack, read from its environment."""
    return {
        **os.environ,
        **environment_of(
            settings,
            "temporal_address",
            "database_url",
            "openai_base_url",
            "openai_api_key",
            "model",
            "task_queue",
            "workspace_root",
            "data_dir",
            "coverage_plans",
            "model_context_window",
            "bash_sandbox",
        ),
    }


@pytest.fixture
def spawn_worker() -> Iterator[Callable[[Settings], subprocess.Popen[bytes]]]:
    """`keel worker` as a separate process, killed at the end of the test."""
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(settings: Settings) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "keel.api.cli.main", "worker"],
            env=worker_env(settings),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)
        return proc

    yield spawn
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


async def wait_until(predicate: Callable[[], bool], limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


@pytest.mark.durability
async def test_sigkilled_worker_mid_step_and_the_run_completes(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    spawn_worker: Callable[[Settings], subprocess.Popen[bytes]],
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[ScriptedToolCall(name="list_files", arguments={})]),
                Turn(tool_calls=[read("pkg/core.py")]),
                Turn(tool_calls=[read("README.md")], delay_s=3.0),
                Turn(content="## Files reviewed\n{files_read}"),
            ]
        )
    )
    settings = settings_for(llm, workspace)
    first = spawn_worker(settings)
    handle = await start_run(temporal_client, settings, workspace)
    await wait_until(lambda: llm.requests_by_turn[2] >= 1)
    first.send_signal(signal.SIGKILL)
    first.wait()
    spawn_worker(settings)
    result = await asyncio.wait_for(handle.result(), timeout=120)

    assert result.status == "completed" and result.steps == 4
    counts = llm.requests_by_turn
    assert counts[0] == 1 and counts[1] == 1 and counts[3] == 1
    assert counts[2] == 2  # only the step in flight was asked again
    messages = await store.conversation(handle.id, None)
    assert [m.role for m in messages].count("assistant") == 4
    assert [m.role for m in messages].count("tool") == 3
    events = await store.list_events(handle.id)
    assert [e.seq for e in events] == list(range(1, 17))
    assert [e.type for e in events].count("message") == 4
    run = await store.get_run(handle.id)
    assert run is not None and run.report is not None and "- README.md" in run.report
    assert run.prompt_tokens == 400  # each completed call counted once


@pytest.mark.durability
async def test_temporal_server_restart_mid_run(
    store: Store,
    workspace: Path,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    server = TemporalDevServer(
        db_file=tmp_path / "restart.sqlite", port=free_port(), log_file=tmp_path / "t.log"
    )
    await server.start()
    try:
        client = await connect(server.address)
        llm = scripted(
            Script(
                turns=[
                    Turn(tool_calls=[read("pkg/core.py")]),
                    Turn(tool_calls=[read("README.md")], delay_s=2.0),
                    Turn(content="Finished after the restart."),
                ]
            )
        )
        settings = settings_for(llm, workspace, temporal_address=server.address)
        async with in_process_worker(client, store, settings):
            handle = await start_run(client, settings, workspace)
            await wait_until(lambda: llm.requests_by_turn[1] >= 1)
            await server.stop()
            await asyncio.sleep(1.0)
            await server.start()
            result = await asyncio.wait_for(handle.result(), timeout=120)
        assert result.status == "completed"
        assert result.stop_reason == "final_answer"
        run = await store.get_run(handle.id)
        assert run is not None and run.report == "Finished after the restart."
    finally:
        await server.stop()


@pytest.mark.scale
async def test_long_run_with_large_outputs_keeps_history_small(
    temporal_client: Client,
    store: Store,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    root = tmp_path / "big"
    root.mkdir()
    line = "x" * 99 + "\n"
    for i in range(200):
        (root / f"f{i:03}.txt").write_text(f"file {i}\n" + line * 1000)
    turns = [
        Turn(tool_calls=[read(f"f{step * 5 + k:03}.txt") for k in range(5)]) for step in range(40)
    ]
    llm = scripted(Script(turns=[*turns, Turn(content="Read {tool_results} outputs.")]))
    settings = settings_for(llm, root)
    spec = agent(max_steps=60, max_tool_calls=400, max_stale_rounds=50)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, root, spec=spec)
        result = await asyncio.wait_for(handle.result(), timeout=600)

    assert result.status == "completed" and result.tool_calls == 200
    tools = [m for m in await store.conversation(handle.id, None) if m.role == "tool"]
    assert len(tools) == 200 and all(len(t.content or "") > 100_000 for t in tools)
    history = await handle.fetch_history()
    size = sum(event.ByteSize() for event in history.events)
    assert size < 2 * 1024 * 1024, f"history is {size} bytes"
    per_step = size / result.steps
    print(f"history {size} bytes, {per_step:.0f} bytes per step")


# What one step (a model call and one tool call) may add to the workflow history.
HISTORY_BYTES_PER_STEP_BUDGET = 1024
# What a whole run may average a step, its opening and closing records included.
HISTORY_BYTES_PER_STEP_AVERAGE = 1024


async def read_run(client: Client, settings: Settings, root: Path, files: int) -> tuple[int, int]:
    """A run reading `files` 100 KB files one a step: its steps and history bytes."""
    spec = agent(max_steps=files + 10, max_tool_calls=files + 10, max_stale_rounds=files + 10)
    handle = await start_run(client, settings, root, spec=spec)
    result = await asyncio.wait_for(handle.result(), timeout=300)
    assert result.steps == files + 1 and result.tool_calls == files
    history = await handle.fetch_history()
    return result.steps, sum(event.ByteSize() for event in history.events)


async def test_history_per_step_stays_in_budget_whatever_the_output_size(
    temporal_client: Client,
    store: Store,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    root = tmp_path / "outputs"
    root.mkdir()
    for i in range(50):
        (root / f"f{i:02}.txt").write_text(f"file {i}\n" + ("y" * 99 + "\n") * 1000)
    turns = [Turn(tool_calls=[read(f"f{i:02}.txt")]) for i in range(50)]
    short = scripted(Script(turns=[*turns[:5], Turn(content="done")]))
    long = scripted(Script(turns=[*turns, Turn(content="done")]))
    sizes: list[tuple[int, int]] = []
    for llm, files in ((short, 5), (long, 50)):
        settings = settings_for(llm, root)
        async with in_process_worker(temporal_client, store, settings):
            sizes.append(await read_run(temporal_client, settings, root, files))
    (short_steps, short_size), (long_steps, long_size) = sizes
    # 50 steps read 5 MB; the history holds references, not the text.
    per_step = (long_size - short_size) / (long_steps - short_steps)
    assert per_step <= HISTORY_BYTES_PER_STEP_BUDGET, f"{per_step:.0f} B a step"
    average = long_size / long_steps
    print(f"history: {per_step:.0f} B a step, {average:.0f} B a step on average")
    assert average <= HISTORY_BYTES_PER_STEP_AVERAGE, f"{average:.0f} B a step on average"
