"""Agents on Anthropic's Messages API: the real `anthropic` client, streaming, errors.

The scripted model server speaks the Messages API at `/v1/messages` (with the same
script as its chat completions), so runs go through the adapter, the client and HTTP.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowFailureError

from keel.activities.store.run_store import Store
from keel.worker.config.settings import Settings
from keel.worker.scripted.llm import Script, ScriptedLLMServer
from tests.conftest import in_process_worker
from tests.integration.runs import start_run
from tests.integration.test_llm_errors import ArrivalClock, flaky, llm_step_attempts
from tests.integration.test_mcp_tools import tool_messages

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]


def on_anthropic(make: MakeSettings, llm: ScriptedLLMServer, workspace: Path) -> Settings:
    """Settings whose model is Anthropic's, served by the scripted server's Messages API."""
    return make(
        llm,
        workspace,
        model="claude-scripted",
        anthropic_api_key="test-anthropic-key",
        anthropic_base_url=llm.base_url.removesuffix("/v1"),
        # Nothing may reach the chat completions endpoint.
        openai_base_url="http://127.0.0.1:9/v1",
        llm_max_attempts=4,
    )


async def test_an_agent_on_anthropic_completes_a_tool_using_run_streamed(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(flaky(503, 0))
    settings = on_anthropic(settings_for, llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace)
        result = await handle.result()

    assert result.status == "completed" and result.stop_reason == "final_answer"
    assert result.tool_calls == 1 and result.usage.prompt_tokens == 200
    assert llm.streamed_messages == 2
    # The tool's output went back as a tool_result block, and the system prompt apart.
    [output] = tool_messages(llm, 1)
    assert output.startswith("README.md (lines 1-1 of 1)") and "# project" in output
    request = llm.last_request(1)
    assert request["model"] == "claude-scripted"
    assert request["messages"][0]["role"] == "system"
    assert {t["function"]["name"] for t in request["tools"]} >= {"read_file", "list_files"}
    messages = await store.conversation(handle.id, None)
    assistant = [m for m in messages if m.role == "assistant"]
    assert assistant[0].tool_calls and assistant[0].tool_calls[0]["function"]["name"] == "read_file"
    assert assistant[-1].content == "## Summary\nA small project."


async def test_a_rate_limited_call_waits_for_retry_after_and_goes_on(
    temporal_client: Client, store: Store, workspace: Path, settings_for: MakeSettings
) -> None:
    arrivals: list[float] = []
    llm = ScriptedLLMServer(flaky(429, 1, retry_after_s=2))
    llm.app.add_middleware(ArrivalClock, arrivals=arrivals)
    with llm:
        settings = on_anthropic(settings_for, llm, workspace)
        async with in_process_worker(temporal_client, store, settings):
            handle = await start_run(temporal_client, settings, workspace)
            result = await handle.result()

    assert result.status == "completed"
    assert llm.requests_by_turn == {0: 2, 1: 1}
    assert arrivals[1] - arrivals[0] >= 1.8  # the server's retry-after, not the ~1 s backoff
    assert await llm_step_attempts(handle) == [2, 1]


async def test_a_400_from_anthropic_fails_the_run_without_a_retry(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(flaky(400, 1))
    settings = on_anthropic(settings_for, llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace)
        with pytest.raises(WorkflowFailureError):
            await handle.result()

    assert llm.requests_by_turn == {0: 1}
    run = await store.get_run(handle.id)
    assert run is not None and run.status == "failed" and run.error is not None
    assert "Anthropic rejected the request (400): invalid_request_error: Scripted failure" in (
        run.error
    )
