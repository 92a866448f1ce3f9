"""The run's collaborators on their own, each hosted by a small probe workflow that offers
only what the collaborator's host protocol asks for (the run's state and event numbers).

Time-skipping server, stand-in activities with the real names and signatures; the probes
run unsandboxed, since they live in this test module.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from keel.worker.temporal_client import DATA_CONVERTER
from keel.workflows.activity_refs import PluginHooks, Subagents, WebhookDeliveries
from keel.workflows.gate.gate import ToolGate
from keel.workflows.gate.hook_models import (
    AfterHooksInput,
    BeforeHooksInput,
    BeforeHooksResult,
    HookVerdict,
    RunEndInput,
)
from keel.workflows.gate.models import GateResult
from keel.workflows.gate.plugin_refs import FAILED_HOOKS, HookRef
from keel.workflows.interactions.models import Interaction
from keel.workflows.run.hooks import RunHooks
from keel.workflows.run.models import RunInput, RunResult, RunState
from keel.workflows.run.notices import RunNotices
from keel.workflows.run.step_models import ToolCallInput, ToolCallRequest, ToolDigest
from keel.workflows.run.subagent_models import (
    ChildEventInput,
    ChildRunNotice,
    OpenSubagentInput,
    SubagentPlan,
)
from keel.workflows.run.subagent_runs import RunSubagents
from keel.workflows.usage.models import Usage
from keel.workflows.webhooks.delivery import WebhookDeliveryWorkflow
from keel.workflows.webhooks.models import (
    PushTarget,
    PushTargets,
    PushTargetsInput,
    WebhookDelivery,
    WebhookReceipt,
)
from tests.integration.runs import agent

TEST_SERVER = Path(sys.executable).parent / "temporal-test-server"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
GUARD = HookRef(plugin="acme", name="guard", event="tool.before", tools="read_*")
REDACT = HookRef(plugin="acme", name="redact", event="tool.after")
TICKET = HookRef(plugin="acme", name="ticket", event="run.end")


def interaction(**fields: object) -> Interaction:
    """An interaction the run waits on; `fields` say how it differs from a confirm."""
    values: dict[str, object] = {
        "id": "ia-3-2",
        "kind": "confirm",
        "step": 3,
        "ord": 2,
        "call_id": "c1",
        "tool": "write_file",
        "arguments": "{}",
        "payload_hash": "h" * 64,
        "risk": "write",
        "subject": "a.txt",
        "requester": "user:alice",
        "approvers": ["user:alice"],
        "created_at": NOW,
        "expires_at": NOW + timedelta(hours=1),
    }
    return Interaction.model_validate({**values, **fields})


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async with await WorkflowEnvironment.start_time_skipping(
        data_converter=DATA_CONVERTER, test_server_existing_path=str(TEST_SERVER)
    ) as environment:
        yield environment


class StandIns(PluginHooks, Subagents, WebhookDeliveries):
    """Hooks, sub-agent records and webhook deliveries that record what they were given."""

    def __init__(self, *, hooks_fail: bool = False) -> None:
        self.hooks_fail = hooks_fail
        self.judged: list[BeforeHooksInput] = []
        self.ended: list[RunEndInput] = []
        self.child_events: list[ChildEventInput] = []
        self.delivered: list[WebhookDelivery] = []

    @activity.defn(name="tool_before_hooks")
    async def tool_before_hooks(self, request: BeforeHooksInput) -> BeforeHooksResult:
        self.judged.append(request)
        if self.hooks_fail:
            raise ApplicationError("the hook's service is down", non_retryable=True)
        return BeforeHooksResult(
            verdicts=[
                HookVerdict(ord=c.ord, action="deny", hook=GUARD.key, reason="secrets")
                for c in request.calls
            ]
        )

    @activity.defn(name="tool_after_hooks")
    async def tool_after_hooks(self, request: AfterHooksInput) -> ToolDigest:
        raise ApplicationError("the redactor crashed", non_retryable=True)

    @activity.defn(name="run_end_hooks")
    async def run_end_hooks(self, request: RunEndInput) -> None:
        self.ended.append(request)
        raise ApplicationError("the ticket system is down", non_retryable=True)

    @activity.defn(name="open_subagent")
    async def open_subagent(self, child: OpenSubagentInput) -> SubagentPlan:
        raise NotImplementedError  # the probes' children do not open a record

    @activity.defn(name="record_child_event")
    async def record_child_event(self, event: ChildEventInput) -> None:
        self.child_events.append(event)

    @activity.defn(name="push_targets")
    async def push_targets(self, request: PushTargetsInput) -> PushTargets:
        return PushTargets(targets=[PushTarget(config_id="cfg-a", url="https://a.example/push")])

    @activity.defn(name="deliver_webhook")
    async def deliver_webhook(self, delivery: WebhookDelivery) -> WebhookReceipt:
        self.delivered.append(delivery)
        return WebhookReceipt(status_code=204, attempt=1)

    def all(self) -> list[object]:
        return [
            self.tool_before_hooks,
            self.tool_after_hooks,
            self.run_end_hooks,
            self.record_child_event,
            self.push_targets,
            self.deliver_webhook,
        ]


class Probe:
    """The host every collaborator here needs: the run's state and its event numbers."""

    def __init__(self) -> None:
        self._state = RunState(step=3, next_seq=10)

    def _take_seqs(self, count: int) -> int:
        first = self._state.next_seq
        self._state.next_seq += count
        return first


class Judged(BaseModel):
    verdicts: list[tuple[int, str, str, str]]
    withheld: GateResult
    next_seq: int


@workflow.defn(name="HooksProbe")
class HooksProbe(Probe):
    @workflow.run
    async def run(self, run: RunInput) -> Judged:
        hooks = RunHooks(self)
        gate = ToolGate(run.agent.tools)
        calls = [
            ToolCallRequest(call_id="c1", name="read_file", arguments='{"path": "a.py"}'),
            ToolCallRequest(call_id="c2", name="list_files", arguments="{}"),
        ]
        decisions = [(2 + i, gate.check(call, {})) for i, call in enumerate(calls)]
        judged = await hooks.before(run, decisions)
        _, read = decisions[0]
        call = ToolCallInput(
            run_id=run.run_id,
            step=3,
            ord=2,
            call_id="c1",
            name="read_file",
            arguments=read.canonical_arguments,
            workspace="/tmp",
            event_seq=self._take_seqs(2),
        )
        withheld = await hooks.after(run, call, read)
        await hooks.run_end(run, "completed", "final_answer", None)
        return Judged(
            verdicts=[(o, d.verdict, d.hook, d.message) for o, d in judged],
            withheld=withheld,
            next_seq=self._state.next_seq,
        )


def hooked_run() -> RunInput:
    spec = agent().model_copy(update={"hooks": [GUARD, REDACT, TICKET]})
    return RunInput(run_id=f"run-{uuid.uuid4().hex[:8]}", agent=spec, model="m")


@asynccontextmanager
async def probing(
    env: WorkflowEnvironment, stand_ins: StandIns, workflows: list[type]
) -> AsyncIterator[str]:
    """A worker for the probe `workflows` and the stand-ins, on a queue of its own."""
    queue = f"probe-{uuid.uuid4().hex[:8]}"
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=workflows,
        activities=stand_ins.all(),
        workflow_runner=UnsandboxedWorkflowRunner(),
        # A probe's own mistake fails it at once rather than retrying its task forever.
        workflow_failure_exception_types=[Exception],
    ):
        yield queue


async def probe(
    env: WorkflowEnvironment,
    stand_ins: StandIns,
    workflows: list[type],
    probe_run: Any,
    run: RunInput,
) -> Any:
    """Run the probe whose run method is `probe_run`, with the run's id as its workflow id."""
    async with probing(env, stand_ins, workflows) as queue:
        return await env.client.execute_workflow(probe_run, run, id=run.run_id, task_queue=queue)


async def test_a_hook_denies_only_the_calls_it_judges_and_the_model_is_told_why(
    env: WorkflowEnvironment,
) -> None:
    stand_ins = StandIns()
    seen = await probe(env, stand_ins, [HooksProbe], HooksProbe.run, hooked_run())
    assert isinstance(seen, Judged)
    [request] = stand_ins.judged
    assert (request.step, [c.tool for c in request.calls]) == (3, ["read_file"])
    assert [h.key for h in request.hooks] == [GUARD.key]
    (read, listing) = seen.verdicts
    assert read[:3] == (2, "deny", "acme/guard")
    assert "refused by the hook acme/guard: secrets" in read[3]
    assert listing == (3, "run", "", "")
    # tool.after failed: the output is withheld and the model told, on the next event numbers.
    assert seen.withheld.content is not None and "output is withheld" in seen.withheld.content
    assert (seen.withheld.event_seq, seen.next_seq) == (12, 14)
    # run.end failed: the outcome stands, the hook was asked once.
    assert [e.status for e in stand_ins.ended] == ["completed"]


async def test_hooks_that_fail_refuse_the_calls_they_had_to_judge(
    env: WorkflowEnvironment,
) -> None:
    stand_ins = StandIns(hooks_fail=True)
    seen = await probe(env, stand_ins, [HooksProbe], HooksProbe.run, hooked_run())
    assert isinstance(seen, Judged)
    (read, listing) = seen.verdicts
    assert read[:3] == (2, "deny", FAILED_HOOKS)
    assert "the tool.before hooks that must judge it failed" in read[3]
    assert listing[1] == "run"


@workflow.defn(name="NoticesProbe")
class NoticesProbe(Probe):
    @workflow.run
    async def run(self, run: RunInput) -> int:
        notices = RunNotices(self)
        waiting = interaction()
        await notices.notify(run, "waiting", interactions=[waiting])
        await notices.notify(run, "completed", stop_reason="final_answer", report_preview="ok")
        return self._state.webhooks_sent


async def test_each_notice_goes_to_the_webhook_and_every_push_config_by_its_own_delivery(
    env: WorkflowEnvironment,
) -> None:
    stand_ins = StandIns()
    run = RunInput(
        run_id=f"run-{uuid.uuid4().hex[:8]}",
        agent=agent(),
        model="m",
        webhook_url="https://hooks.example/keel",
        push_notifications=True,
        session_id="ctx-1",
    )
    async with probing(env, stand_ins, [NoticesProbe, WebhookDeliveryWorkflow]) as queue:
        sent = await env.client.execute_workflow(
            NoticesProbe.run, run, id=run.run_id, task_queue=queue
        )
        # Deliveries are abandoned children: each ends on its own, under the id the run gave it.
        for kind in ("webhook-1", "push-1-cfg-a", "webhook-2", "push-2-cfg-a"):
            await env.client.get_workflow_handle(f"{run.run_id}-{kind}").result()
    assert sent == 2
    by_url = sorted((d.url, d.notice.id, d.notice.event) for d in stand_ins.delivered)
    assert by_url == [
        ("https://a.example/push", f"{run.run_id}/1", "run.waiting"),
        ("https://a.example/push", f"{run.run_id}/2", "run.finished"),
        ("https://hooks.example/keel", f"{run.run_id}/1", "run.waiting"),
        ("https://hooks.example/keel", f"{run.run_id}/2", "run.finished"),
    ]
    waiting = next(d.notice for d in stand_ins.delivered if d.notice.event == "run.waiting")
    assert [i.id for i in waiting.interactions] == ["ia-3-2"]
    assert waiting.session_id == "ctx-1"  # push configs belong to the A2A context


class Children(BaseModel):
    answers: list[GateResult]
    state: RunState


@workflow.defn(name="StandInChild")
class StandInChild(Probe):
    """A sub-agent that tells its parent it waits on a person, then ends as its task says."""

    @workflow.run
    async def run(self, child: RunInput) -> RunResult:
        info = workflow.info()
        assert child.task is not None and info.parent is not None
        if child.task.ord == 3:
            raise ApplicationError("the sub-agent failed", non_retryable=True)
        mine = child.model_copy(
            update={"run_id": info.workflow_id, "parent_run_id": info.parent.workflow_id}
        )
        asked = interaction(id="kid:ia-1-2", kind="ask_user", tool="ask_user", risk="read")
        self._state.interactions[asked.id] = asked
        await RunSubagents(self, StandInChild.run, SubagentsProbe.child_status).tell_parent(mine)
        return RunResult(
            run_id=info.workflow_id,
            status="completed",
            stop_reason="final_answer",
            steps=2,
            tool_calls=5,
            usage=Usage(prompt_tokens=100, completion_tokens=10),
            report_preview=f"{child.task.max_tool_calls} {child.depth} {child.trigger}",
        )


@workflow.defn(name="SubagentsProbe")
class SubagentsProbe(Probe):
    def __init__(self) -> None:
        super().__init__()
        self._subagents = RunSubagents(self, StandInChild.run, SubagentsProbe.child_status)

    @workflow.signal(name="child_status")
    async def child_status(self, notice: ChildRunNotice) -> None:
        await self._subagents.child_status(notice)

    @workflow.run
    async def run(self, run: RunInput) -> Children:
        gate = ToolGate(run.agent.tools, subagents=run.agent.subagents)
        calls = [
            ToolCallRequest(
                call_id=f"t{i}", name="task", arguments=f'{{"agent": "explore", "prompt": "p{i}"}}'
            )
            for i in range(2)
        ]
        tasks = [(2 + i, gate.check(call, {})) for i, call in enumerate(calls)]
        answers = await self._subagents.run_all(run, tasks)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return Children(answers=[answers[o] for o in sorted(answers)], state=self._state)


async def test_task_calls_run_as_children_with_a_share_each_and_count_on_the_parent(
    env: WorkflowEnvironment,
) -> None:
    stand_ins = StandIns()
    spec = agent(max_tool_calls=41)
    run = RunInput(run_id=f"run-{uuid.uuid4().hex[:8]}", agent=spec, model="m", depth=0)
    seen = await probe(env, stand_ins, [SubagentsProbe, StandInChild], SubagentsProbe.run, run)
    assert isinstance(seen, Children)
    ok, failed = seen.answers
    first, second = f"{run.run_id}-task-3-2", f"{run.run_id}-task-3-3"
    assert (ok.child_run_id, ok.is_error, failed.child_run_id, failed.is_error) == (
        first,
        False,
        second,
        True,
    )
    # Each child got half of the 41 tool calls left, one level deeper, as the parent's child.
    child = await env.client.get_workflow_handle(first, result_type=RunResult).result()
    assert child.report_preview == "20 1 parent"
    # Its usage and tool calls count on the parent; the failed one spent nothing.
    assert seen.state.subagent_tool_calls == 5
    assert seen.state.usage.total_tokens == 110
    assert [seen.state.children[c].status for c in (first, second)] == ["completed", "failed"]
    # The child's wait reached the parent's stream while it ran.
    [event] = stand_ins.child_events
    assert (event.run_id, event.child.run_id) == (run.run_id, first)
    assert (event.child.status, event.child.pending) == ("waiting", ["kid:ia-1-2"])
