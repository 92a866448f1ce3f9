"""A run's `bash` call goes through the worker's sandbox (the other integration tests run
commands unconfined, `bash_sandbox="off"`): confined where bubblewrap is installed, and
refused with a sentence the model reads where it is not."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.activities.tools.sandbox import MISSING_BWRAP
from keel.worker.scripted.llm import Script, Turn
from tests.conftest import in_process_worker
from tests.integration.keel_http import MakeSettings, StartLLM
from tests.integration.runs import start_run
from tests.integration.test_tool_faults import bash, build_that_may_run_bash, tool_texts


async def run_one_command(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    *command: str,
) -> str:
    """What the model was told about `command`, run under `bash_sandbox="bwrap"`."""
    llm = scripted(Script(turns=[Turn(tool_calls=[bash(*command)]), Turn(content="Done.")]))
    settings = settings_for(llm, workspace, bash_sandbox="bwrap")
    async with in_process_worker(temporal_client, store, settings):
        spec = build_that_may_run_bash()
        handle = await start_run(temporal_client, settings, workspace, spec=spec)  # type: ignore[arg-type]
        result = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.status == "completed"
    [told] = tool_texts(llm, 1)
    return told


@pytest.mark.needs_bwrap
async def test_a_command_writes_its_workspace_and_sees_nothing_else_of_tmp(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    beside = tmp_path / "beside-the-workspace.txt"
    beside.write_text("not for the command")
    code = f"import os; open('made.txt', 'w').write('x'); print(os.path.exists({str(beside)!r}))"

    told = await run_one_command(
        temporal_client, store, workspace, scripted, settings_for, sys.executable, "-c", code
    )

    assert told == "exit code 0\n--- stdout ---\nFalse"
    assert (workspace / "made.txt").read_text() == "x"


async def test_without_bubblewrap_the_model_is_told_and_nothing_runs(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs-here"))
    code = "open('made.txt', 'w').write('x')"

    told = await run_one_command(
        temporal_client, store, workspace, scripted, settings_for, sys.executable, "-c", code
    )

    assert MISSING_BWRAP in told
    assert not (workspace / "made.txt").exists()
