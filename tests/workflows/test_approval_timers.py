"""Approval expiry on durable timers, with time skipping and stand-in activities."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from keel.worker.temporal_client import DATA_CONVERTER
from keel.workflows.activity_refs import InteractionRecords, LlmCalls, RunRecords, ToolCalls
from keel.workflows.interactions.models import (
    InteractionDecision,
    OpenInteractionsInput,
    ResolveInteractionInput,
    ResolveInteractionResult,
)
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.agent_spec import ApprovalPolicy
from keel.workflows.run.models import (
    FinishRunInput,
    FinishRunResult,
    RunInput,
    RunProgress,
    StartRunInput,
)
from keel.workflows.run.step_models import (
    LlmStepInput,
    LlmStepResult,
    ToolCallInput,
    ToolCallRequest,
    ToolDigest,
)
from tests.integration.runs import agent

TEST_SERVER = Path(sys.executable).parent / "temporal-test-server"
WRITE_A = ToolCallRequest(
    call_id="c1", name="write_file", arguments='{"path": "a.txt", "content": "A"}'
)


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async with await WorkflowEnvironment.start_time_skipping(
        data_converter=DATA_CONVERTER, test_server_existing_path=str(TEST_SERVER)
    ) as environment:
        yield environment


class StandIns(RunRecords, LlmCalls, ToolCalls, InteractionRecords):
    """Activities with the real names and signatures, recording what they were given."""

    def __init__(self, first_call: ToolCallRequest = WRITE_A) -> None:
        self.first_call = first_call
        self.llm_inputs: list[LlmStepInput] = []
        self.tools_run: list[ToolCallInput] = []
        self.tool_timeouts: list[timedelta | None] = []
        self.resolved: list[ResolveInteractionInput] = []
        self.finished: list[FinishRunInput] = []

    @activity.defn(name="start_run")
    async def start_run(self, start: StartRunInput) -> None:
        return None

    @activity.defn(name="llm_step")
    async def llm_step(self, step: LlmStepInput) -> LlmStepResult:
        self.llm_inputs.append(step)
        if step.step == 1:
            return LlmStepResult(tool_calls=[self.first_call])
        return LlmStepResult()

    @activity.defn(name="run_tool")
    async def run_tool(self, call: ToolCallInput) -> ToolDigest:
        self.tools_run.append(call)
        self.tool_timeouts.append(activity.info().start_to_close_timeout)
        return ToolDigest(is_error=False)

    @activity.defn(name="open_interactions")
    async def open_interactions(self, request: OpenInteractionsInput) -> None:
        return None

    @activity.defn(name="resolve_interaction")
    async def resolve_interaction(
        self, request: ResolveInteractionInput
    ) -> ResolveInteractionResult:
        # Like Postgres: the first outcome stored is the one every later request gets back.
        self.resolved.append(request)
        first = next(r for r in self.resolved if r.interaction.id == request.interaction.id)
        return ResolveInteractionResult(interaction=first.interaction)

    @activity.defn(name="finish_run")
    async def finish_run(self, finish: FinishRunInput) -> FinishRunResult:
        self.finished.append(finish)
        return FinishRunResult(report_preview="final")

    def all(self) -> list[object]:
        return [
            self.start_run,
            self.llm_step,
            self.run_tool,
            self.open_interactions,
            self.resolve_interaction,
            self.finish_run,
        ]


def run_input(on_expiry: str = "tell_model") -> RunInput:
    spec = agent("build").model_copy(
        update={"approval": ApprovalPolicy(expires_after_s=86_400, on_expiry=on_expiry)}
    )
    run_id = f"run-ts-{uuid.uuid4().hex[:8]}"
    return RunInput(
        run_id=run_id,
        agent=spec,
        input="change it",
        model="m",
        workspace="/tmp",
        requester="user:alice",
    )


async def wait_pending(env: WorkflowEnvironment, handle: object) -> list[str]:
    with env.auto_time_skipping_disabled():
        for _ in range(200):
            progress: RunProgress = await handle.query(AgentRunWorkflow.progress)  # type: ignore[attr-defined]
            if progress.pending_interactions:
                return progress.pending_interactions
            await env.sleep(timedelta(milliseconds=0))
    raise AssertionError("no interaction became pending")


async def test_a_24h_request_expires_after_a_day_and_the_model_is_told(
    env: WorkflowEnvironment,
) -> None:
    stand_ins = StandIns()
    queue = f"ts-{uuid.uuid4().hex[:8]}"
    async with Worker(
        env.client, task_queue=queue, workflows=[AgentRunWorkflow], activities=stand_ins.all()
    ):
        inp = run_input()
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, inp, id=inp.run_id, task_queue=queue
        )
        [ia_id] = await wait_pending(env, handle)
        await env.sleep(timedelta(hours=23))
        assert (await handle.query(AgentRunWorkflow.progress)).pending_interactions == [ia_id]
        await env.sleep(timedelta(hours=2))
        result = await handle.result()

        # A decision after expiry is refused.
        with pytest.raises((RPCError, WorkflowUpdateFailedError)):  # the workflow has closed
            await handle.execute_update(
                AgentRunWorkflow.decide,
                InteractionDecision(interaction_id=ia_id, decision="reject", approver="user:alice"),
            )

    assert result.status == "completed" and result.stop_reason == "final_answer"
    assert stand_ins.tools_run == []
    assert stand_ins.resolved[0].interaction.status == "expired"
    told = stand_ins.llm_inputs[1].gate_results
    assert len(told) == 1 and told[0].content is not None
    assert "expired" in told[0].content and "did not run" in told[0].content


async def test_with_the_fail_policy_an_expiry_fails_the_run(env: WorkflowEnvironment) -> None:
    stand_ins = StandIns()
    queue = f"ts-{uuid.uuid4().hex[:8]}"
    async with Worker(
        env.client, task_queue=queue, workflows=[AgentRunWorkflow], activities=stand_ins.all()
    ):
        inp = run_input(on_expiry="fail")
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, inp, id=inp.run_id, task_queue=queue
        )
        await wait_pending(env, handle)
        await env.sleep(timedelta(hours=25))
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
    assert "expired unanswered" in str(failure.value.cause)
    assert stand_ins.finished[-1].status == "failed"
    assert stand_ins.finished[-1].stop_reason == "approval_expired"
    assert stand_ins.tools_run == []


async def test_a_decision_inside_the_window_runs_the_approved_payload(
    env: WorkflowEnvironment,
) -> None:
    stand_ins = StandIns()
    queue = f"ts-{uuid.uuid4().hex[:8]}"
    async with Worker(
        env.client, task_queue=queue, workflows=[AgentRunWorkflow], activities=stand_ins.all()
    ):
        inp = run_input()
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, inp, id=inp.run_id, task_queue=queue
        )
        [ia_id] = await wait_pending(env, handle)
        await env.sleep(timedelta(hours=20))
        [ia] = await handle.query(AgentRunWorkflow.list_interactions)
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update(
                AgentRunWorkflow.decide,
                InteractionDecision(
                    interaction_id=ia_id,
                    decision="approve",
                    approver="user:eve",
                    payload_hash=ia.payload_hash,
                ),
            )
        await handle.execute_update(
            AgentRunWorkflow.decide,
            InteractionDecision(
                interaction_id=ia_id,
                decision="approve",
                approver="user:alice",
                payload_hash=ia.payload_hash,
            ),
        )
        result = await handle.result()
    assert result.status == "completed"
    [ran] = stand_ins.tools_run
    assert ran.interaction_id == ia_id
    assert ran.arguments == '{"content":"A","path":"a.txt"}'


async def approve_the_pending_call(env: WorkflowEnvironment, handle: Any) -> None:
    [ia_id] = await wait_pending(env, handle)
    [ia] = await handle.query(AgentRunWorkflow.list_interactions)
    await handle.execute_update(
        AgentRunWorkflow.decide,
        InteractionDecision(
            interaction_id=ia_id,
            decision="approve",
            approver="user:alice",
            payload_hash=ia.payload_hash,
        ),
    )


@pytest.mark.parametrize(
    ("call", "limit"),
    [
        pytest.param(WRITE_A, timedelta(seconds=90), id="write"),
        pytest.param(
            ToolCallRequest(
                call_id="c1", name="bash", arguments='{"command": ["make"], "timeout_s": 1200}'
            ),
            timedelta(seconds=1200 + 60),
            id="long-command",
        ),
        pytest.param(
            ToolCallRequest(call_id="c1", name="bash", arguments='{"command": ["make"]}'),
            timedelta(seconds=120 + 60),
            id="command-default",
        ),
    ],
)
async def test_a_command_gets_as_long_as_its_own_timeout(
    env: WorkflowEnvironment, call: ToolCallRequest, limit: timedelta
) -> None:
    stand_ins = StandIns(first_call=call)
    queue = f"ts-{uuid.uuid4().hex[:8]}"
    async with Worker(
        env.client, task_queue=queue, workflows=[AgentRunWorkflow], activities=stand_ins.all()
    ):
        inp = run_input()
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, inp, id=inp.run_id, task_queue=queue
        )
        await approve_the_pending_call(env, handle)
        result = await handle.result()
    assert result.status == "completed"
    assert [c.name for c in stand_ins.tools_run] == [call.name]
    assert stand_ins.tool_timeouts == [limit]
