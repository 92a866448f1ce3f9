"""Provider errors on the real dev server: Temporal retries what can succeed, fails the rest."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.types import ASGIApp, Receive, Scope, Send
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle

from keel.activities.store.run_store import Store
from keel.worker.config.settings import Settings
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from tests.conftest import in_process_worker
from tests.integration.runs import start_run

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]


def flaky(status: int, times: int, retry_after_s: float | None = None) -> Script:
    """A run of two steps whose first LLM call fails `times` times with `status`."""
    return Script(
        turns=[
            Turn(
                tool_calls=[ScriptedToolCall(name="read_file", arguments={"path": "README.md"})],
                fail_status=status,
                fail_times=times,
                retry_after_s=retry_after_s,
            ),
            Turn(content="## Summary\nA small project."),
        ]
    )


class ArrivalClock:
    """ASGI middleware noting when each model request (either API) arrives."""

    def __init__(self, app: ASGIApp, arrivals: list[float]) -> None:
        self.app = app
        self.arrivals = arrivals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].endswith(("/chat/completions", "/messages")):
            self.arrivals.append(time.monotonic())
        await self.app(scope, receive, send)


async def llm_step_attempts(handle: WorkflowHandle[Any, Any]) -> list[int]:
    """The attempt that ended each `llm_step` activity, regular or local, in order."""
    history = await handle.fetch_history()
    llm_steps: set[int] = set()
    attempts: list[int] = []
    for e in history.events:
        if e.HasField("activity_task_scheduled_event_attributes"):
            if e.activity_task_scheduled_event_attributes.activity_type.name == "llm_step":
                llm_steps.add(e.event_id)
        elif e.HasField("activity_task_started_event_attributes"):
            if e.activity_task_started_event_attributes.scheduled_event_id in llm_steps:
                attempts.append(e.activity_task_started_event_attributes.attempt)
        elif e.HasField("marker_recorded_event_attributes"):
            details = e.marker_recorded_event_attributes.details
            if "data" in details:
                data = json.loads(details["data"].payloads[0].data)
                if data.get("activity_type") == "llm_step":
                    attempts.append(data["attempt"])
    return attempts


async def test_server_errors_are_retried_until_the_call_succeeds(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(flaky(503, 2))
    settings = settings_for(llm, workspace, llm_max_attempts=4)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace)
        result = await handle.result()

    assert result.status == "completed" and result.stop_reason == "final_answer"
    assert result.steps == 2 and result.tool_calls == 1
    assert llm.requests_by_turn == {0: 3, 1: 1}
    assert await llm_step_attempts(handle) == [3, 1]
    # Failed attempts leave nothing behind: one assistant message per step.
    messages = await store.conversation(handle.id, None)
    assert [m.role for m in messages].count("assistant") == 2
    run = await store.get_run(handle.id)
    assert run is not None and run.status == "completed" and run.error is None


async def test_rate_limit_retry_waits_for_the_servers_retry_after(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    settings_for: MakeSettings,
) -> None:
    arrivals: list[float] = []
    llm = ScriptedLLMServer(flaky(429, 1, retry_after_s=2))
    # Not the `scripted` fixture: the clock must wrap the app before it serves.
    llm.app.add_middleware(ArrivalClock, arrivals=arrivals)
    with llm:
        settings = settings_for(llm, workspace, llm_max_attempts=4)
        async with in_process_worker(temporal_client, store, settings):
            handle = await start_run(temporal_client, settings, workspace)
            result = await handle.result()

    assert result.status == "completed"
    assert llm.requests_by_turn == {0: 2, 1: 1}
    assert len(arrivals) == 3
    # Without the server's Retry-After the first retry would come after ~1 s.
    assert arrivals[1] - arrivals[0] >= 1.8
    assert await llm_step_attempts(handle) == [2, 1]


@pytest.mark.parametrize("status", [400, 401])
async def test_a_rejected_request_fails_the_run_without_a_retry(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    status: int,
) -> None:
    llm = scripted(flaky(status, 1))
    settings = settings_for(llm, workspace, llm_max_attempts=4)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace)
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()

    assert f"rejected the request ({status})" in str(failure.value.cause)
    assert llm.requests_by_turn == {0: 1}
    assert await llm_step_attempts(handle) == [1]
    run = await store.get_run(handle.id)
    assert run is not None and run.status == "failed" and run.stop_reason == "error"
    assert run.error is not None
    assert f"LLM provider rejected the request ({status})" in run.error
    assert f"Scripted failure 1 of 1 for turn 0 (HTTP {status})" in run.error
    events = await store.list_events(handle.id)
    assert events[-1].type == "error"
