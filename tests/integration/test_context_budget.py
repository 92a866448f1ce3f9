"""Long reviews on small windows: caps, pruning and compaction, against a model that
enforces its window the way OpenAI's API does (the scripted server's window mode) and
decides its calls from what its context holds (the scripted reviewer)."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pytest
from temporalio.client import Client
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

from bench.workspaces import generate_workspace
from keel.activities.store.context_store import ContextStore
from keel.activities.store.run_store import Store
from keel.activities.store.run_tree import RunTreeStore
from keel.worker.config.settings import Settings
from keel.worker.scripted.llm import Script, ScriptedLLMServer
from keel.worker.temporal_client import DATA_CONVERTER
from keel.workflows import timeouts
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.agent_spec import AgentSpec
from tests.conftest import in_process_worker
from tests.integration.runs import agent, start_run

HISTORIES = Path(__file__).parent.parent / "histories"
StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]


def one_conversation(**limits: int) -> AgentSpec:
    """The review agent without its `task` tool: its context budget alone keeps it in the window."""
    return agent("review", **limits).model_copy(update={"subagents": []})


def named_files(report: str, files: list[str]) -> list[str]:
    return [f for f in files if re.search(rf"(?m)^- {re.escape(f)}$", report)]


@pytest.mark.scale
async def test_long_review_fits_a_16k_window(
    temporal_client: Client,
    store: Store,
    scripted: StartLLM,
    settings_for: MakeSettings,
    tmp_path: Path,
) -> None:
    ws = generate_workspace(tmp_path / "big", total_bytes=2_100_000)
    assert len(ws.files) >= 150 and ws.total_bytes >= 2_000_000
    llm = scripted(Script(name="scripted", policy="reviewer", context_window=16_384))
    settings = settings_for(llm, tmp_path, model_context_window=16_384)
    # One conversation (no `task` tool), so its compactions are what keeps it in the window.
    spec = agent("review", max_steps=1000, max_tool_calls=1000).model_copy(update={"subagents": []})
    started = time.monotonic()
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, ws.root, spec=spec)
        result = await handle.result()
    elapsed = time.monotonic() - started
    assert result.status == "completed", result.error
    assert result.stop_reason == "final_answer"

    sizes = llm.requests
    assert sizes and not any(r.rejected for r in sizes)
    assert llm.largest_request <= 16_384

    run = await store.get_run(result.run_id)
    assert run is not None and run.report
    named = named_files(run.report, ws.files)
    assert len(named) >= 0.9 * len(ws.files), f"{len(named)} of {len(ws.files)} files named"

    events = await store.list_events(result.run_id, limit=5000)
    compactions = [e for e in events if e.type == "compaction"]
    assert compactions, "a 2 MB review on a 16k window must compact"
    first = compactions[0].data
    assert int(first["tokens_after"]) < int(first["tokens_before"])  # type: ignore[call-overload]
    # The first file's finding was made long before the first compaction...
    early, (early_line, _) = next(iter(ws.bugs.items()))
    assert early == ws.files[0] and int(first["through_step"]) > 2  # type: ignore[call-overload]
    # ...and survives every compaction into the report.
    for path, (line, _) in ws.bugs.items():
        if path in named:
            assert f"- {path}:{line}:" in run.report, f"finding in {path} lost"
    assert f"- {early}:{early_line}:" in run.report
    history = await handle.fetch_history()
    per_step = sum(event.ByteSize() for event in history.events) / max(1, result.steps)
    print(
        f"\n{result.steps} steps, {len(compactions)} compactions, {elapsed:.1f}s, "
        f"largest request {llm.largest_request}, {per_step:.0f} B history/step"
    )
    assert per_step <= 1024


@pytest.mark.scale
async def test_a_delegated_review_of_2mb_fits_a_16k_window_in_every_run(
    temporal_client: Client,
    store: Store,
    scripted: StartLLM,
    settings_for: MakeSettings,
    tmp_path: Path,
) -> None:
    ws = generate_workspace(tmp_path / "big", total_bytes=2_100_000)
    llm = scripted(Script(name="scripted", policy="reviewer", context_window=16_384))
    settings = settings_for(llm, tmp_path, model_context_window=16_384)
    spec = agent("review", max_steps=100, max_tool_calls=2000)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, ws.root, spec=spec)
        result = await handle.result()
    assert result.status == "completed", result.error
    assert result.stop_reason == "final_answer"
    assert llm.requests and not any(r.rejected for r in llm.requests)
    tree = await RunTreeStore(store.pool).subtree("default", result.run_id)
    children = tree[1:]
    assert len(children) >= 2_000_000 // 120_000 - 1
    assert {c.status for c in children} == {"completed"}
    # The lead delegated every part: it read no file itself.
    lead = await store.conversation(result.run_id, None)
    assert not [m for m in lead if m.role == "tool" and m.name == "read_file"]
    report = tree[0].report or ""
    named = named_files(report, ws.files)
    assert len(named) == len(ws.files), f"{len(named)} of {len(ws.files)} files named"
    assert "## Not covered\nnone" in report
    for path, (line, _) in ws.bugs.items():
        assert f"- {path}:{line}:" in report, f"finding in {path} lost"
    # Cost stays linear: each part is read in a short conversation of its own.
    source_tokens = ws.total_bytes / 4
    assert sum(r.tokens for r in llm.requests) <= 3 * source_tokens
    # The lead's own conversation (the parts' calls, the answers, its notes) compacts too.
    events = await store.list_events(result.run_id, limit=5000)
    assert any(e.type == "compaction" for e in events)
    history = await handle.fetch_history()
    replayed = await Replayer(
        workflows=[AgentRunWorkflow], data_converter=DATA_CONVERTER
    ).replay_workflow(history)
    assert replayed.replay_failure is None
    if os.environ.get("KEEL_RECORD_HISTORY"):
        # KEEL_RECORD_HISTORY=name adds it to the histories future code must replay.
        target = HISTORIES / f"{os.environ['KEEL_RECORD_HISTORY']}_delegated_compaction.json"
        target.write_text(json.dumps(history.to_json_dict(), indent=1))


@pytest.mark.parametrize("summaries", ["fail", "empty"])
async def test_a_summary_the_model_cannot_write_is_written_from_keels_records(
    temporal_client: Client,
    store: Store,
    scripted: StartLLM,
    settings_for: MakeSettings,
    tmp_path: Path,
    summaries: Literal["fail", "empty"],
) -> None:
    ws = generate_workspace(tmp_path / "ws", total_bytes=90_000)
    llm = scripted(
        Script(name="scripted", policy="reviewer", context_window=6_000, summaries=summaries)
    )
    settings = settings_for(llm, tmp_path, model_context_window=6_000, llm_max_attempts=2)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(
            temporal_client, settings, ws.root, spec=one_conversation(max_steps=200)
        )
        result = await handle.result()
    assert result.status == "completed", result.error
    assert result.stop_reason == "final_answer"
    events = await store.list_events(result.run_id, limit=5000)
    compactions = [e.data for e in events if e.type == "compaction"]
    assert compactions and all(c["fallback"] for c in compactions)
    run = await store.get_run(result.run_id)
    assert run is not None and run.report
    # What the records held went on: every file once, every finding into the report.
    assert len(named_files(run.report, ws.files)) == len(ws.files)
    for path, (line, _) in ws.bugs.items():
        assert f"- {path}:{line}:" in run.report, f"finding in {path} lost"


async def test_unknown_window_is_learnt_from_the_provider(
    temporal_client: Client,
    store: Store,
    scripted: StartLLM,
    settings_for: MakeSettings,
    tmp_path: Path,
) -> None:
    ws = generate_workspace(tmp_path / "ws", total_bytes=150_000)
    model = f"unknown-model-{time.monotonic_ns()}"
    llm = scripted(Script(name=model, policy="reviewer", context_window=5_000))
    settings = settings_for(llm, tmp_path, model=model)
    # Parallel sub-agents would each be refused once before the window is learnt.
    spec = one_conversation(max_steps=200, max_tool_calls=200)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, ws.root, spec=spec)
        first = await handle.result()
        assert first.status == "completed", first.error
        assert first.stop_reason == "final_answer"
        refused = [r for r in llm.requests if r.rejected]
        assert len(refused) == 1, "one refusal teaches Keel the window"
        events = await store.list_events(first.run_id, limit=5000)
        compactions = [e.data for e in events if e.type == "compaction"]
        assert compactions and compactions[0]["refused"] is True
        assert compactions[0]["context_window"] == 5_000
        learned = await ContextStore(store.pool).budget_inputs(first.run_id, model)
        assert learned.learned_window == 5_000
        # The compaction is in the history as decisions: the run replays.
        history = await handle.fetch_history()
        replayed = await Replayer(
            workflows=[AgentRunWorkflow], data_converter=DATA_CONVERTER
        ).replay_workflow(history)
        assert replayed.replay_failure is None
        if os.environ.get("KEEL_RECORD_COMPACTION_HISTORY"):
            target = HISTORIES / "agent_run_compaction.json"
            target.write_text(json.dumps(history.to_json_dict(), indent=1))

        llm.reset()
        second = await (await start_run(temporal_client, settings, ws.root, spec=spec)).result()
    assert second.status == "completed", second.error
    assert llm.requests and not any(r.rejected for r in llm.requests)
    assert llm.largest_request <= 5_000
    run = await store.get_run(second.run_id)
    assert run is not None and run.report
    assert len(named_files(run.report, ws.files)) == len(ws.files)


async def test_a_review_continues_as_new_after_compactions_with_its_sub_agents(
    temporal_client: Client,
    store: Store,
    scripted: StartLLM,
    settings_for: MakeSettings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ws = generate_workspace(tmp_path / "ws", total_bytes=1_300_000)
    llm = scripted(Script(name="scripted", policy="reviewer", context_window=16_384))
    # Every step's history is long enough to continue as new, the children's too
    # (outside the sandbox, which would import its own copy of the limit).
    monkeypatch.setattr(timeouts, "MAX_HISTORY_EVENTS", 5)
    settings = settings_for(llm, tmp_path, model_context_window=16_384, workflow_sandbox=False)
    spec = agent("review", max_steps=100, max_tool_calls=1000)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, ws.root, spec=spec)
        result = await handle.result()
    assert result.status == "completed", result.error
    assert result.stop_reason == "final_answer"
    executions = [w async for w in temporal_client.list_workflows(f'WorkflowId = "{handle.id}"')]
    assert len(executions) == result.steps  # one execution a step: it went on after each
    events = await store.list_events(result.run_id, limit=5000)
    steps_compacted = [int(e.data["step"]) for e in events if e.type == "compaction"]  # type: ignore[call-overload]
    assert steps_compacted and max(steps_compacted) > 1, "compacted in a later execution"
    tree = await RunTreeStore(store.pool).subtree("default", result.run_id)
    children = tree[1:]
    assert len(children) > 8 and {c.status for c in children} == {"completed"}
    # Each child was started once, under the id its parent's step and call give it.
    assert len({c.id for c in children}) == len(children)
    assert all(re.fullmatch(rf"{handle.id}-task-\d+-\d+", c.id) for c in children)
    # The usage carried across every continue-as-new: the tree's, rolled up.
    assert result.usage.total_tokens == sum(r.prompt_tokens + r.completion_tokens for r in tree)
    report = tree[0].report or ""
    assert len(named_files(report, ws.files)) == len(ws.files)
    for path, (line, _) in ws.bugs.items():
        assert f"- {path}:{line}:" in report, f"finding in {path} lost"
    # Every execution (compactions, children, continue-as-new) replays, with the same
    # limit (outside the sandbox, as it ran).
    replayer = Replayer(
        workflows=[AgentRunWorkflow],
        data_converter=DATA_CONVERTER,
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    for execution in executions:
        execution_handle = temporal_client.get_workflow_handle(handle.id, run_id=execution.run_id)
        history = await execution_handle.fetch_history()
        assert (await replayer.replay_workflow(history)).replay_failure is None
