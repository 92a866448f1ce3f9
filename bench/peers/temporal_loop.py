"""The agent as a hand-written minimal Temporal workflow: an LLM activity and a `bump` activity.

    .venv/bin/python -m bench.peers.temporal_loop --temporal HOST:PORT --llm-url URL \
        [--local-activities] [--steps 20 ...]

The workflow keeps the conversation and sends all of it to the LLM activity at
every step, as a first loop on Temporal would; payloads are plain JSON (the
default data converter). With `--local-activities` both activities are local.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    import openai

    from bench.peers.agent import API_KEY, INSTRUCTIONS, PROMPT, bump, expected_answer, max_turns
    from bench.peers.chat import Message, chat, opening, tool_message
    from bench.peers.measure import Peer, PeerArgs, WorkflowRef, check_answer, serve

LLM_START_TO_CLOSE = timedelta(seconds=60)
TOOL_START_TO_CLOSE = timedelta(seconds=10)
RETRY = RetryPolicy(maximum_attempts=3)


@dataclass
class LoopInput:
    prompt: str
    max_turns: int
    local_activities: bool


class LoopActivities:
    """The LLM call, with the worker's client."""

    def __init__(self, llm: openai.AsyncOpenAI) -> None:
        self._llm = llm

    @activity.defn(name="chat")
    async def chat(self, messages: list[Message]) -> Message:
        return await chat(self._llm, messages)


@activity.defn(name="bump")
async def bump_activity(n: int) -> int:
    return bump(n)


@workflow.defn
class BumpLoopWorkflow:
    @workflow.run
    async def run(self, input: LoopInput) -> str:
        messages = opening(input.prompt, INSTRUCTIONS)
        for _ in range(input.max_turns):
            reply = await self._chat(input, messages)
            messages.append(reply)
            calls = reply.get("tool_calls") or []
            if not calls:
                return str(reply["content"] or "")
            for call in calls:
                n = json.loads(call["function"]["arguments"])["n"]
                messages.append(tool_message(call["id"], await self._bump(input, n)))
        raise ApplicationError(
            f"The model did not answer within {input.max_turns} turns.", non_retryable=True
        )

    async def _chat(self, input: LoopInput, messages: list[Message]) -> Message:
        if input.local_activities:
            return await workflow.execute_local_activity_method(
                LoopActivities.chat,
                messages,
                start_to_close_timeout=LLM_START_TO_CLOSE,
                retry_policy=RETRY,
            )
        return await workflow.execute_activity_method(
            LoopActivities.chat,
            messages,
            start_to_close_timeout=LLM_START_TO_CLOSE,
            retry_policy=RETRY,
        )

    async def _bump(self, input: LoopInput, n: int) -> int:
        if input.local_activities:
            return await workflow.execute_local_activity(
                bump_activity, n, start_to_close_timeout=TOOL_START_TO_CLOSE, retry_policy=RETRY
            )
        return await workflow.execute_activity(
            bump_activity, n, start_to_close_timeout=TOOL_START_TO_CLOSE, retry_policy=RETRY
        )


@asynccontextmanager
async def loop_peer(args: PeerArgs) -> AsyncIterator[Peer]:
    client = await Client.connect(args.temporal_address)
    llm = openai.AsyncOpenAI(base_url=args.llm_url, api_key=API_KEY, max_retries=0)
    task_queue = f"peers-loop-{uuid.uuid4().hex[:8]}"
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[BumpLoopWorkflow],
        activities=[LoopActivities(llm).chat, bump_activity],
    )

    async def run_once() -> WorkflowRef | None:
        workflow_id = f"peers-loop-{uuid.uuid4().hex[:12]}"
        handle = await client.start_workflow(
            BumpLoopWorkflow.run,
            LoopInput(PROMPT, max_turns(args.steps), args.local_activities),
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
    from bench.peers.temporal_loop import loop_peer as importable_peer

    serve("bench.peers.temporal_loop", importable_peer)
