"""Tools under faults: NUL bytes in arguments and output, and a worker killed at the approval.

- A NUL in a model's `write_file` path or `bash` argument is an error the model reads,
  and the run goes on (it used to fail the worker 30 times on Postgres' text rule).
- A command that prints a NUL or binary output is stored escaped and reported as it
  ran (it used to be reported as a worker crash).
- A worker SIGKILLed within milliseconds of the approval's 200: a new worker runs the
  command exactly once. A call claimed but never started runs; one that started is
  reported as of unknown outcome, truthfully.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from keel.activities.store.audit import AuditLog
from keel.activities.store.interaction_store import InteractionStore
from keel.activities.store.run_store import Store
from keel.activities.tools.mcp_client import McpClient
from keel.activities.tools.sandbox import Sandbox
from keel.activities.tools.tool_activities import ToolActivities
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.workflows.gate.permissions import PermissionRule
from keel.workflows.run.models import RunResult
from keel.workflows.run.step_models import ToolCallInput
from tests.conftest import in_process_worker
from tests.integration.runs import agent, start_run
from tests.integration.test_approvals import decide, finished, pending, start
from tests.integration.test_durability import worker_env
from tests.integration.test_mcp_tools import approve
from tests.integration.test_mcp_tools import pending as pending_in

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
APPEND = [sys.executable, "-c", "open('ran.txt', 'a').write('x')"]


def bash(*command: str) -> ScriptedToolCall:
    return ScriptedToolCall(name="bash", arguments={"command": list(command)})


def tool_texts(llm: ScriptedLLMServer, turn: int) -> list[str]:
    return [m["content"] for m in llm.last_request(turn)["messages"] if m["role"] == "tool"]


def build_that_may_run_bash() -> object:
    spec = agent("build")
    rule = PermissionRule(permission="bash", pattern="*", action="allow")
    return spec.model_copy(update={"permissions": [*spec.permissions, rule]})


async def test_a_nul_in_tool_arguments_is_an_error_the_model_corrects(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(
                            name="write_file", arguments={"path": "a\0b.txt", "content": "x"}
                        ),
                        bash("echo", "a\0b"),
                        ScriptedToolCall(name="read_file", arguments={"path": "x\0"}),
                    ]
                ),
                Turn(
                    tool_calls=[ScriptedToolCall(name="read_file", arguments={"path": "README.md"})]
                ),
                Turn(content="Corrected."),
            ]
        )
    )
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace, spec=agent("build"))
        result: RunResult = await asyncio.wait_for(handle.result(), timeout=60)

    assert result.status == "completed" and result.steps == 3
    told = tool_texts(llm, 1)
    assert len(told) == 3
    assert "path contains a NUL character" in told[0]
    assert "command[1] contains a NUL character" in told[1]
    assert "path contains a NUL character" in told[2]
    assert "# project" in tool_texts(llm, 2)[-1]  # the run went on
    assert not list(workspace.glob("a*b.txt"))
    events = [e.type for e in await store.list_events(handle.id)]
    assert "interaction_pending" not in events and events.count("tool_result") == 4


async def test_output_with_a_nul_byte_is_stored_escaped_and_reported_truthfully(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        bash("python3", "-c", "print('a'+chr(0))"),
                        bash(
                            sys.executable,
                            "-c",
                            "import sys; sys.stdout.buffer.write(b'\\x89PNG\\0\\xff')",
                        ),
                    ]
                ),
                Turn(content="Printed."),
            ]
        )
    )
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        spec = build_that_may_run_bash()
        handle = await start_run(temporal_client, settings, workspace, spec=spec)  # type: ignore[arg-type]
        result: RunResult = await asyncio.wait_for(handle.result(), timeout=60)

    assert result.status == "completed"
    text, binary = tool_texts(llm, 1)
    assert text.startswith("exit code 0") and "a\\x00" in text and "stopped" not in text
    assert binary.startswith("exit code 0") and "PNG\\x00\\xff" in binary
    stored = [m.content for m in await store.conversation(handle.id, None) if m.role == "tool"]
    assert stored == [text, binary]
    previews = [
        e.data["preview"] for e in await store.list_events(handle.id) if e.type == "tool_result"
    ]
    assert any("a\\x00" in str(p) for p in previews)


@pytest.mark.parametrize("started", [False, True], ids=["claimed-never-started", "started"])
async def test_a_claim_tells_never_started_from_outcome_unknown(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    started: bool,
) -> None:
    llm = scripted(Script(turns=[Turn(tool_calls=[bash(*APPEND)]), Turn(content="Done.")]))
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace, spec=agent("build"))
        asked = await pending_in(handle)
        # As if a worker had claimed the call and died: before starting it, or after.
        assert await store.claim_execution(handle.id, asked.step, asked.ord, "dead-worker")
        if started:
            assert await store.execution_starts(handle.id, asked.step, asked.ord, "dead-worker")
        await approve(handle, asked)
        result: RunResult = await asyncio.wait_for(handle.result(), timeout=60)

    assert result.status == "completed"
    [told] = tool_texts(llm, 1)
    marker = workspace / "ran.txt"
    if started:
        assert not marker.exists()
        assert "after this bash call had started" in told and "not run again" in told
    else:
        assert marker.read_text() == "x"
        assert told.startswith("exit code 0")


@pytest.mark.durability
async def test_a_worker_killed_right_after_the_approval_runs_the_command_once(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(Script(turns=[Turn(tool_calls=[bash(*APPEND)]), Turn(content="Appended.")]))
    settings = settings_for(llm, workspace, api_port=free_port())

    def spawn() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "keel.api.cli.main", "worker"],
            env=worker_env(settings),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    workers: list[subprocess.Popen[bytes]] = []
    outcomes: list[str] = []
    try:
        # Its own stack: the workers are `keel worker` processes, killed mid-step.
        async with serve_api(settings) as url, httpx.AsyncClient(base_url=url, timeout=60) as http:
            for round_, delay_s in enumerate((0.0, 0.001, 0.003, 0.01)):
                root = workspace / f"round-{round_}"
                root.mkdir()
                workers.append(spawn())
                run_id = await start(http, root)
                [ia] = await pending(http, run_id)
                approved = await decide(http, run_id, ia)
                await asyncio.sleep(delay_s)
                workers[-1].send_signal(signal.SIGKILL)
                workers[-1].wait()
                assert approved.status_code == 200, approved.text
                workers.append(spawn())
                run = await finished(http, run_id)
                assert run["status"] == "completed", run
                told = [
                    m.content or ""
                    for m in await store.conversation(run_id, None)
                    if m.role == "tool"
                ]
                ran = (root / "ran.txt").read_text() if (root / "ran.txt").exists() else ""
                if told[0].startswith("exit code 0"):
                    outcomes.append("ran once")
                    assert ran == "x", (round_, ran)
                else:
                    # Killed after the command started (the sandbox died with the worker,
                    # maybe before it wrote): the model is told exactly that.
                    outcomes.append("started, outcome unknown")
                    assert "after this bash call had started" in told[0], told
                    assert ran in ("", "x"), (round_, ran)
                workers[-1].send_signal(signal.SIGKILL)
                workers[-1].wait()
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    print(f"outcomes: {outcomes}")
    # Killed before it started (claimed or not), it ran on the new worker, once.
    assert "ran once" in outcomes


@pytest.mark.durability
@pytest.mark.needs_bwrap  # the sandbox is what kills the command with its worker
async def test_a_command_dies_with_its_killed_worker_and_the_model_is_told(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    tick = "import time\nwhile True:\n    open('ticks.txt', 'a').write('t')\n    time.sleep(0.1)"
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[bash(sys.executable, "-c", tick)]),
                Turn(content="Stopped."),
            ]
        )
    )
    settings = settings_for(llm, workspace, api_port=free_port(), bash_sandbox="bwrap")
    ticks = workspace / "ticks.txt"

    def spawn() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "keel.api.cli.main", "worker"],
            env=worker_env(settings),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    workers = [spawn()]
    try:
        # Its own stack: the workers are `keel worker` processes, killed mid-step.
        async with serve_api(settings) as url, httpx.AsyncClient(base_url=url, timeout=60) as http:
            run_id = await start(http, workspace)
            [ia] = await pending(http, run_id)
            assert (await decide(http, run_id, ia)).status_code == 200
            for _ in range(400):
                if ticks.exists() and len(ticks.read_text()) >= 5:
                    break
                await asyncio.sleep(0.05)
            assert ticks.exists(), "the command never started"
            workers[0].send_signal(signal.SIGKILL)
            workers[0].wait()
            await asyncio.sleep(0.5)
            settled = len(ticks.read_text())
            await asyncio.sleep(1.5)
            assert len(ticks.read_text()) == settled, "the command outlived its worker"
            workers.append(spawn())
            run = await finished(http, run_id)
        assert run["status"] == "completed"
        [told] = [
            m.content or "" for m in await store.conversation(run_id, None) if m.role == "tool"
        ]
        assert "after this bash call had started" in told and "not run again" in told
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


async def test_a_worker_killed_after_an_approved_calls_output_was_stored_still_ends_it(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    """Found by the scale-out drill: a worker SIGKILLed after an approved call's output was
    stored and before its interaction was marked `executed` left it `executing` for good,
    though the run completed: the retry answered from the stored output and marked
    nothing. The retry ends the interaction as the output says, and runs nothing again."""
    llm = scripted(Script(turns=[Turn(tool_calls=[bash(*APPEND)]), Turn(content="Appended.")]))
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace, spec=agent("build"))
        asked = await pending_in(handle)
        await approve(handle, asked)
        result: RunResult = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.status == "completed"
    interactions = InteractionStore(store.pool)
    # Where the killed worker left it: the output stored, the interaction still executing.
    assert await interactions.mark(handle.id, asked.id, "executing", when="executed")
    tools = ToolActivities(
        store,
        interactions,
        AuditLog(store.pool),
        workspace.parent,
        mcp=McpClient({}, timeout_s=5),
        sandbox=Sandbox.configured("off"),
    )
    retried = ToolCallInput(
        run_id=handle.id,
        step=asked.step,
        ord=asked.ord,
        call_id=asked.call_id,
        name="bash",
        arguments=asked.arguments,
        workspace=str(workspace),
        event_seq=900,
        interaction_id=asked.id,
    )
    digest = await ActivityEnvironment().run(tools.run_tool, retried)
    assert not digest.is_error
    assert await interactions.status(handle.id, asked.id) == "executed"
    assert (workspace / "ran.txt").read_text() == "x"
