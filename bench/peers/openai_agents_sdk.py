"""The agent on Temporal's OpenAI Agents integration (`temporalio.openai_agents`).

    .venv/bin/python -m bench.peers.openai_agents_sdk --temporal HOST:PORT --llm-url URL ...

An `agents.Agent` with `bump` as an activity tool (`activity_as_tool`), run by
`Runner.run` inside a workflow; `OpenAIAgentsPlugin` turns each model call into
its `invoke_model_activity`. The plugin's model provider is a chat completions
model on the scripted server (the server has no Responses API), built with
`max_retries=0` so retries are Temporal's. Tracing is off: nothing leaves the machine.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    import openai
    from agents import Agent, Model, ModelProvider, OpenAIChatCompletionsModel, RunConfig, Runner
    from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
    from temporalio.openai_agents.workflow import activity_as_tool

    from bench.peers.agent import (
        API_KEY,
        INSTRUCTIONS,
        MODEL,
        PROMPT,
        TOOL_NAME,
        expected_answer,
        max_turns,
    )
    from bench.peers.agent import bump as add_one
    from bench.peers.measure import Peer, PeerArgs, WorkflowRef, check_answer, serve

LLM_START_TO_CLOSE = timedelta(seconds=60)
TOOL_START_TO_CLOSE = timedelta(seconds=10)
RETRY = RetryPolicy(maximum_attempts=3)


@dataclass
class AgentsInput:
    prompt: str
    max_turns: int


# The function's name is the tool's name the model sees.
@activity.defn(name=TOOL_NAME)
async def bump(n: int) -> int:
    """Return n + 1."""
    return add_one(n)


@workflow.defn
class OpenAIAgentsBumpWorkflow:
    @workflow.run
    async def run(self, input: AgentsInput) -> str:
        agent = Agent(
            name="bumper",
            instructions=INSTRUCTIONS,
            model=MODEL,
            tools=[
                activity_as_tool(
                    bump, start_to_close_timeout=TOOL_START_TO_CLOSE, retry_policy=RETRY
                )
            ],
        )
        result = await Runner.run(
            agent,
            input.prompt,
            max_turns=input.max_turns,
            run_config=RunConfig(tracing_disabled=True),
        )
        return str(result.final_output)


class ScriptedProvider(ModelProvider):
    """Chat completions models on one OpenAI-compatible server."""

    def __init__(self, llm: openai.AsyncOpenAI) -> None:
        self._llm = llm

    def get_model(self, model_name: str | None) -> Model:
        return OpenAIChatCompletionsModel(model=model_name or MODEL, openai_client=self._llm)


@asynccontextmanager
async def openai_agents_peer(args: PeerArgs) -> AsyncIterator[Peer]:
    llm = openai.AsyncOpenAI(base_url=args.llm_url, api_key=API_KEY, max_retries=0)
    plugin = OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(
            start_to_close_timeout=LLM_START_TO_CLOSE, retry_policy=RETRY
        ),
        model_provider=ScriptedProvider(llm),
    )
    client = await Client.connect(args.temporal_address, plugins=[plugin])
    task_queue = f"peers-oai-{uuid.uuid4().hex[:8]}"
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[OpenAIAgentsBumpWorkflow],
        activities=[bump],
    )

    async def run_once() -> WorkflowRef | None:
        workflow_id = f"peers-oai-{uuid.uuid4().hex[:12]}"
        handle = await client.start_workflow(
            OpenAIAgentsBumpWorkflow.run,
            AgentsInput(PROMPT, max_turns(args.steps)),
            id=workflow_id,
            task_queue=task_queue,
            execution_timeout=timedelta(seconds=args.timeout_s),
        )
        check_answer(await handle.result(), expected_answer(args.steps))
        return WorkflowRef(workflow_id, handle.first_execution_run_id)

    try:
        async with worker:
            yield Peer(run_once=run_once, client=client)
    finally:
        await llm.close()


if __name__ == "__main__":
    # Temporal's sandbox re-imports a workflow by its module's name, which `__main__` is not.
    from bench.peers.openai_agents_sdk import openai_agents_peer as importable_peer

    serve("bench.peers.openai_agents_sdk", importable_peer)
