"""Recorded histories replay against the current workflow code."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from keel.activities.store.run_store import Store
from keel.worker.config.settings import Settings
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.worker.temporal_client import DATA_CONVERTER
from keel.workflows.interactions.models import InteractionDecision
from keel.workflows.run.agent_run import AgentRunWorkflow
from tests.conftest import in_process_worker
from tests.integration.runs import agent, start_run

HISTORIES = Path(__file__).parent.parent / "histories"


def replayer() -> Replayer:
    return Replayer(workflows=[AgentRunWorkflow], data_converter=DATA_CONVERTER)


@pytest.mark.parametrize("path", sorted(HISTORIES.glob("*.json")), ids=lambda p: p.stem)
async def test_committed_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))
    result = await replayer().replay_workflow(history)
    assert result.replay_failure is None


# A model known to be fast: the first call is local and opens the run's record.
@pytest.mark.parametrize("fast", [True, False], ids=["fast-model", "new-model"])
async def test_a_fresh_history_replays_and_a_changed_workflow_is_caught(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: Callable[[Script], ScriptedLLMServer],
    settings_for: Callable[..., Settings],
    fast: bool,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(name="read_file", arguments={"path": "pkg/core.py"}),
                        ScriptedToolCall(name="list_files", arguments={}),
                    ]
                ),
                Turn(tool_calls=[ScriptedToolCall(name="read_file", arguments="{broken")]),
                Turn(content="done"),
            ]
        )
    )
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace, fast_model=fast)
        await handle.result()
    history = await handle.fetch_history()
    assert (await replayer().replay_workflow(history)).replay_failure is None
    if os.environ.get("KEEL_RECORD_HISTORY"):
        # Run with KEEL_RECORD_HISTORY=name to add histories that future code must replay.
        target = HISTORIES / f"{os.environ['KEEL_RECORD_HISTORY']}_{'fast' if fast else 'new'}.json"
        target.write_text(json.dumps(history.to_json_dict(), indent=1))

    # The check can fail: a history whose recorded commands differ is refused.
    events = history.to_json_dict()["events"]
    # Drop every record of the tool calls (local activity markers): the workflow's
    # commands no longer match what the history says happened.
    tampered = [
        e
        for e in events
        if e.get("markerRecordedEventAttributes", {}).get("markerName") != "core_local_activity"
    ]
    assert len(tampered) < len(events)
    bad = WorkflowHistory.from_json(handle.id, {"events": tampered})
    failed = await replayer().replay_workflow(bad, raise_on_replay_failure=False)
    assert failed.replay_failure is not None


async def test_a_history_with_decisions_replays(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: Callable[[Script], ScriptedLLMServer],
    settings_for: Callable[..., Settings],
) -> None:
    # Two approvals decided through the `decide` update (stored before it answers), one
    # each way.
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(
                            name="write_file", arguments={"path": "a.txt", "content": "A"}
                        ),
                        ScriptedToolCall(name="bash", arguments={"command": ["true"]}),
                    ]
                ),
                Turn(content="done"),
            ]
        )
    )
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace, spec=agent("build"))
        for _ in range(600):
            asked = await handle.query(AgentRunWorkflow.list_interactions)
            if len(asked) == 2:
                break
            await asyncio.sleep(0.05)
        write, command = sorted(asked, key=lambda i: i.ord)
        for interaction, decision in ((write, "approve"), (command, "reject")):
            await handle.execute_update(
                AgentRunWorkflow.decide,
                InteractionDecision(
                    interaction_id=interaction.id,
                    decision=decision,  # type: ignore[arg-type]
                    approver="anonymous",
                    payload_hash=interaction.payload_hash,
                ),
            )
        result = await handle.result()
    assert result.status == "completed"
    history = await handle.fetch_history()
    assert (await replayer().replay_workflow(history)).replay_failure is None
    if os.environ.get("KEEL_RECORD_HISTORY"):
        target = HISTORIES / f"{os.environ['KEEL_RECORD_HISTORY']}_decisions.json"
        target.write_text(json.dumps(history.to_json_dict(), indent=1))
