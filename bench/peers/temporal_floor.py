"""Temporal's own cost of a step: a workflow of two no-op local activities a step, no model.

    .venv/bin/python -m bench.peers.temporal_floor --temporal HOST:PORT --llm-url URL [--steps 20]

Every durable loop whose model call and tool call are each a local activity pays at
least this much a step on top of the work itself: two activations, two local
activities scheduled and resolved, their payloads converted and visited. The worker
runs unsandboxed, as Keel's workers do. Nothing is sent to the scripted model; its
URL is accepted so that `bench.peers` can start this like the others.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

with workflow.unsafe.imports_passed_through():
    from bench.peers.measure import Peer, PeerArgs, PeerError, WorkflowRef, serve

START_TO_CLOSE = timedelta(seconds=10)
ACTIVITIES_A_STEP = 2
"""The model call and the tool call."""


@activity.defn(name="nothing")
async def nothing(n: int) -> int:
    return n + 1


@workflow.defn
class FloorWorkflow:
    @workflow.run
    async def run(self, steps: int) -> int:
        done = 0
        for _ in range(steps * ACTIVITIES_A_STEP):
            done = await workflow.execute_local_activity(
                nothing, done, start_to_close_timeout=START_TO_CLOSE
            )
        if done != steps * ACTIVITIES_A_STEP:
            raise ApplicationError(f"Counted {done} activities.", non_retryable=True)
        return done


@asynccontextmanager
async def floor_peer(args: PeerArgs) -> AsyncIterator[Peer]:
    client = await Client.connect(args.temporal_address)
    task_queue = f"peers-floor-{uuid.uuid4().hex[:8]}"
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[FloorWorkflow],
        activities=[nothing],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )

    async def run_once() -> WorkflowRef | None:
        workflow_id = f"peers-floor-{uuid.uuid4().hex[:12]}"
        handle = await client.start_workflow(
            FloorWorkflow.run,
            args.steps,
            id=workflow_id,
            task_queue=task_queue,
            execution_timeout=timedelta(seconds=args.timeout_s),
        )
        done = await handle.result()
        if done != args.steps * ACTIVITIES_A_STEP:
            raise PeerError(f"The floor workflow ran {done} activities.")
        return WorkflowRef(workflow_id, handle.first_execution_run_id)

    async with worker:
        yield Peer(run_once=run_once, client=client)


if __name__ == "__main__":
    from bench.peers.temporal_floor import floor_peer as importable_peer

    serve("bench.peers.temporal_floor", importable_peer)
