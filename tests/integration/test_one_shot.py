"""The one-shot model calls (router, memory, compaction) on Anthropic's Messages API.

The scripted server answers the Messages API at `/v1/messages` with the same script,
routing and facts as its chat completions, and the OpenAI-compatible endpoint points
nowhere, so every call below went through `OneShotModel`, the `anthropic` client and
HTTP. The retries run in a real Temporal worker, on both built-in adapters: a 429
waits for the server's retry-after and goes on, a 400 fails at once.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from pathlib import Path

import anthropic
import openai
import pytest
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from keel.activities.llm.providers.anthropic_messages import AnthropicMessages
from keel.activities.llm.providers.one_shot import OneShotModel
from keel.activities.store.run_store import Store
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn
from tests.conftest import auth_headers
from tests.integration.keel_http import MakeSettings, StartLLM, finished, keel_api
from tests.integration.test_anthropic import on_anthropic
from tests.integration.test_llm_errors import ArrivalClock
from tests.integration.test_memory import AGENT, ask
from tests.integration.test_router import routed

ANSWER = "## Answer\nDone on Anthropic."


async def test_memory_keeps_facts_of_a_run_on_an_anthropic_model(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    tmp_path: Path,
) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "helper.md").write_text(AGENT)
    llm = scripted(Script(turns=[Turn(content="Noted.")]))
    # No KEEL_MEMORY_MODEL: the extraction asks the run's own (Anthropic) model.
    settings = on_anthropic(settings_for, llm, workspace).model_copy(
        update={"api_port": free_port(), "agents_dir": agents}
    )
    alice = auth_headers(f"acme-{uuid.uuid4().hex[:6]}", "alice")
    async with keel_api(temporal_client, store, settings) as http:
        run = await ask(http, alice, workspace, "My name is Alice. I prefer tabs for indentation.")
        listed = (await http.get("/v1/memories", headers=alice)).json()

    assert {m["fact"] for m in listed["memories"]} == {
        "The user's name is Alice.",
        "The user prefers tabs for indentation.",
    }
    assert all(m["source_run_id"] == run["id"] for m in listed["memories"])
    # The run's step and the extraction both went to the Messages API, 100 + 20 each.
    assert run["usage"]["prompt_tokens"] == 200 and run["usage"]["completion_tokens"] == 40


async def test_the_router_classifies_on_an_anthropic_model(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(Script(turns=[Turn(content=ANSWER)]))
    settings = on_anthropic(settings_for, llm, workspace).model_copy(
        update={"api_port": free_port()}
    )
    who = auth_headers(f"router-{uuid.uuid4().hex[:6]}", "dev")
    async with keel_api(temporal_client, store, settings, headers=who) as http:
        run_id = await routed(http, workspace, "Use the investigate agent: why is add() slow?")
        run = await finished(http, run_id, headers=who)

    assert run["status"] == "completed", run
    assert [c["agent"] for c in run["children"]] == ["investigate"]
    assert run["report"] == ANSWER


@activity.defn(name="one_shot_probe")
async def one_shot_probe(call: list[str]) -> str:
    """One call through `OneShotModel`, as the three activities make: [v1 URL, model]."""
    base_url, name = call
    client = anthropic.AsyncAnthropic(
        base_url=base_url.removesuffix("/v1"), api_key="test-key", max_retries=0
    )
    model = OneShotModel(
        openai.AsyncOpenAI(base_url=base_url, api_key="test-key", max_retries=0),
        AnthropicMessages(client, 256),
    )
    try:
        reply = await model.complete(
            name, [{"role": "user", "content": "Hello."}], purpose="the probe"
        )
    finally:
        await client.close()
    return reply.text


@workflow.defn(name="OneShotProbe", sandboxed=False)
class OneShotProbe:
    @workflow.run
    async def run(self, call: list[str]) -> str:
        return await workflow.execute_activity(
            one_shot_probe,
            call,
            start_to_close_timeout=timedelta(seconds=20),
            # The backoff alone would retry after 0.1 s: a later arrival is the retry-after.
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=0.1), maximum_attempts=3),
        )


async def probe(client: Client, llm: ScriptedLLMServer, model: str) -> str:
    queue = f"one-shot-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[OneShotProbe],
        activities=[one_shot_probe],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        return await client.execute_workflow(
            OneShotProbe.run,
            [llm.base_url, model],
            id=f"one-shot-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
        )


@pytest.mark.parametrize(
    ("model", "rejected"),
    [
        ("claude-scripted", "Anthropic rejected the request (400)"),
        ("scripted", "LLM provider rejected the probe (400)"),
    ],
)
async def test_a_429_waits_for_retry_after_and_a_400_is_not_retried(
    temporal_client: Client, model: str, rejected: str
) -> None:
    arrivals: list[float] = []
    limited = ScriptedLLMServer(
        Script(turns=[Turn(content="Hi.", fail_status=429, fail_times=1, retry_after_s=2)])
    )
    limited.app.add_middleware(ArrivalClock, arrivals=arrivals)
    with limited:
        started = time.monotonic()
        assert await probe(temporal_client, limited, model) == "Hi."
    assert limited.requests_by_turn == {0: 2}
    assert arrivals[1] - arrivals[0] >= 1.8 and time.monotonic() - started < 15

    with ScriptedLLMServer(
        Script(turns=[Turn(content="Hi.", fail_status=400, fail_times=1)])
    ) as bad:
        with pytest.raises(WorkflowFailureError) as failed:
            await probe(temporal_client, bad, model)
        assert bad.requests_by_turn == {0: 1}
    cause = str(failed.value.cause.cause) if failed.value.cause else ""
    assert rejected in cause, cause
