"""Where model calls run: fast models in the worker, slow ones through the server.

A run's first call is a local activity when its starter knows the model is fast;
after a call that took under `LLM_LOCAL_BELOW_MS` the next runs as a local activity too,
until `LLM_LOCAL_BUDGET_MS` of model time has passed since the last regular one.
Both kinds show in the history, and a finished call is never made twice.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import ActivityEnvironment

from keel.activities.llm.step import LlmActivities
from keel.activities.store.audit import AuditLog
from keel.activities.store.run_store import Store
from keel.api.core.run_orders import as_started
from keel.worker.config.settings import Settings
from keel.worker.runtime import openai_client
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.workflows import timeouts
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.models import RunInput, RunResult, StartRunInput
from keel.workflows.run.step_models import LlmStepInput
from tests.conftest import in_process_worker
from tests.integration.runs import agent, start_run

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]


def listing(delay_s: float = 0.0) -> Turn:
    return Turn(tool_calls=[ScriptedToolCall(name="list_files", arguments={})], delay_s=delay_s)


async def llm_calls_by_kind(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """'regular' or 'local' for each `llm_step` in the history, in order."""
    kinds: list[str] = []
    history = await handle.fetch_history()
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            if event.activity_task_scheduled_event_attributes.activity_type.name == "llm_step":
                kinds.append("regular")
        elif event.HasField("marker_recorded_event_attributes"):
            details = event.marker_recorded_event_attributes.details
            if "data" in details:
                data = json.loads(details["data"].payloads[0].data)
                if data.get("activity_type") == "llm_step":
                    kinds.append("local")
    return kinds


Played = tuple[ScriptedLLMServer, WorkflowHandle[Any, Any], RunResult]
Play = Callable[..., Awaitable[Played]]


@pytest.fixture
def play(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> Play:
    """Run the review agent on a script to its end, on an in-process worker."""

    async def run(
        turns: list[Turn], fast: bool = False, below_ms: int = timeouts.LLM_LOCAL_BELOW_MS
    ) -> Played:
        llm = scripted(Script(turns=turns))
        settings = settings_for(llm, workspace)
        spec = agent(max_stale_rounds=10)
        async with in_process_worker(temporal_client, store, settings):
            handle = await start_run(
                temporal_client,
                settings,
                workspace,
                spec=spec,
                fast_model=fast,
                llm_local_below_ms=below_ms,
            )
            result = await asyncio.wait_for(handle.result(), timeout=60)
        assert result.status == "completed" and result.steps == len(turns)
        return llm, handle, result

    return run


@pytest.mark.parametrize(
    ("fast", "first"), [(True, "local"), (False, "regular")], ids=["known-fast", "unknown"]
)
async def test_a_fast_model_is_called_in_the_worker(
    play: Play, store: Store, fast: bool, first: str
) -> None:
    llm, handle, result = await play(
        [listing(), listing(), listing(), Turn(content="done")], fast=fast
    )
    assert await llm_calls_by_kind(handle) == [first, "local", "local", "local"]
    assert llm.requests_by_turn == {0: 1, 1: 1, 2: 1, 3: 1}
    run = await store.get_run(handle.id)
    assert run is not None and run.prompt_tokens == 400
    assert result.usage.prompt_tokens == 400 and result.usage.completion_tokens == 80


async def test_a_slow_model_is_called_through_the_server(play: Play) -> None:
    slow = timeouts.LLM_LOCAL_BELOW_MS / 1000 + 0.2
    _, handle, _ = await play([listing(slow), listing(slow), Turn(content="done")])
    assert await llm_calls_by_kind(handle) == ["regular", "regular", "regular"]


async def test_local_calls_checkpoint_once_their_model_time_adds_up(play: Play) -> None:
    # A quick call, then one of 60% of the budget: with it the local calls' model time
    # would pass the budget, so the next call is regular; that holds however slow the
    # machine is, as waiting only adds to it. Calls stay "fast" up to well past either
    # delay, so it is the budget, not a slow call, that ends the local ones; and the
    # quick call leaves half the budget to a loaded machine before it would.
    budget = timeouts.LLM_LOCAL_BUDGET_MS
    long = budget * 0.6 / 1000
    turns = [listing(), listing(), listing(long), listing(), listing(), listing(long)]
    _, handle, _ = await play([*turns, Turn(content="done")], below_ms=budget * 5 // 2)
    kinds = await llm_calls_by_kind(handle)
    assert kinds == ["regular", "local", "local", "regular", "local", "local", "regular"]


async def test_a_repeated_call_answers_from_the_record_without_asking_the_model(
    store: Store, workspace: Path, scripted: StartLLM, settings_for: MakeSettings
) -> None:
    # What a local call does when a crash lost its result: the same step, asked again.
    llm = scripted(Script(turns=[listing(), Turn(content="done")]))
    settings = settings_for(llm, workspace)
    run_id = "run-test-journal"
    await store.start_run(
        StartRunInput(
            run_id=run_id,
            agent="review",
            system_prompt="Review.",
            input="Review this project.",
            model=settings.model,
            workspace=str(workspace),
            tenant_id="default",
            requester="tester",
            trigger="api",
            session_id=None,
            parent_run_id=None,
            event_seq=1,
        )
    )
    client = openai_client(settings)
    activities = LlmActivities(client, store, AuditLog(store.pool))
    step = LlmStepInput(
        run_id=run_id, step=1, model=settings.model, tools=["list_files"], event_seq=2
    )
    env = ActivityEnvironment()
    try:
        first = await env.run(activities.llm_step, step)
        again = await env.run(activities.llm_step, step)
    finally:
        await client.close()
    assert again == first and [c.name for c in again.tool_calls] == ["list_files"]
    assert llm.requests_by_turn[0] == 1
    messages = await store.conversation(run_id, None)
    assert [m.role for m in messages].count("assistant") == 1


async def test_a_run_starts_in_the_worker_once_its_model_has_been_fast(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(Script(turns=[listing(), listing(), listing(), Turn(content="done")]))
    # A model name no other test has used: nothing is known of its speed yet.
    settings = settings_for(llm, workspace, model=f"scripted-{uuid.uuid4().hex[:8]}")
    kinds: list[list[str]] = []
    async with in_process_worker(temporal_client, store, settings):
        for _ in range(2):
            run_id = f"run-test-{uuid.uuid4().hex[:10]}"
            run = RunInput(
                run_id=run_id,
                agent=agent(),
                input="Review this project.",
                model=settings.model,
                workspace=str(workspace),
            )
            # As the API starts it: texts stored, and the model's speed looked up.
            started = await as_started(store, run)
            assert started.input == "" and started.texts_key is not None
            handle = await temporal_client.start_workflow(
                AgentRunWorkflow.run, started, id=run_id, task_queue=settings.task_queue
            )
            result = await asyncio.wait_for(handle.result(), timeout=60)
            assert result.status == "completed"
            kinds.append(await llm_calls_by_kind(handle))
            messages = await store.conversation(run_id, None)
            assert [m.content for m in messages[:2]] == [run.agent.system_prompt, run.input]
    # Unknown at first, so through the server; four fast calls later, in the worker.
    assert kinds == [["regular", "local", "local", "local"], ["local"] * 4]
