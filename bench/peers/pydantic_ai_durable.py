"""The agent on Pydantic AI's Temporal durability (`TemporalDurability`, `PydanticAIPlugin`).

    .venv/bin/python -m bench.peers.pydantic_ai_durable --temporal HOST:PORT --llm-url URL ...

A Pydantic AI `Agent` with a `bump` tool and the `TemporalDurability`
capability, run by `agent.run` inside a workflow: each model request and each
tool call is an activity the capability registers (`AgentPlugin`), and
`PydanticAIPlugin` on the client brings its data converter and sandbox settings.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import UsageLimits
    from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin

    from bench.peers.agent import PROMPT, expected_answer, max_turns
    from bench.peers.measure import Peer, PeerArgs, WorkflowRef, check_answer, serve
    from bench.peers.pydantic_ai_agent import bump_agent


@dataclass
class PydanticAIInput:
    prompt: str
    llm_url: str
    """Picks the agent the worker built; see `bump_agent`."""
    max_requests: int


@workflow.defn
class PydanticAIBumpWorkflow:
    @workflow.run
    async def run(self, input: PydanticAIInput) -> str:
        result = await bump_agent(input.llm_url).run(
            input.prompt, usage_limits=UsageLimits(request_limit=input.max_requests)
        )
        return result.output


@asynccontextmanager
async def pydantic_ai_peer(args: PeerArgs) -> AsyncIterator[Peer]:
    agent = bump_agent(args.llm_url)
    client = await Client.connect(args.temporal_address, plugins=[PydanticAIPlugin()])
    task_queue = f"peers-pydantic-{uuid.uuid4().hex[:8]}"
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[PydanticAIBumpWorkflow],
        plugins=[AgentPlugin(agent)],
    )

    async def run_once() -> WorkflowRef | None:
        workflow_id = f"peers-pydantic-{uuid.uuid4().hex[:12]}"
        handle = await client.start_workflow(
            PydanticAIBumpWorkflow.run,
            PydanticAIInput(PROMPT, args.llm_url, max_turns(args.steps)),
            id=workflow_id,
            task_queue=task_queue,
            execution_timeout=timedelta(seconds=args.timeout_s),
        )
        check_answer(await handle.result(), expected_answer(args.steps))
        return WorkflowRef(workflow_id, handle.first_execution_run_id)

    async with worker:
        yield Peer(run_once=run_once, client=client)


if __name__ == "__main__":
    # Temporal's sandbox re-imports a workflow by its module's name, which `__main__` is not.
    from bench.peers.pydantic_ai_durable import pydantic_ai_peer as importable_peer

    serve("bench.peers.pydantic_ai_durable", importable_peer)
