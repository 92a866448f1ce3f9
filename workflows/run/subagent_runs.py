"""The run's sub-agents: `task` calls run as child runs, and a child's side of it.

`RunSubagents` starts one step's `task` calls as child `AgentRunWorkflow`s (a bounded
number at a time, each with its share of what the parent has left), counts their
usage and tool calls on the parent, and relays what a child waits on to its parent's
stream. A child opens its own record from the prompt its parent stored, so the
parent's history holds only each child's start and end. The naming and sharing
rules are pure code in `subagents`; `AgentRunWorkflow` composes this and its
`child_status` signal delegates here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import (
    CancelledError,
    ChildWorkflowError,
    FailureError,
    WorkflowAlreadyStartedError,
)
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import Subagents
    from keel.workflows.gate.gate import GateDecision
    from keel.workflows.gate.models import GateResult
    from keel.workflows.run import subagents
    from keel.workflows.run.models import RunInput, RunResult, RunState, RunStatus
    from keel.workflows.run.subagent_models import (
        ChildEventInput,
        ChildRun,
        ChildRunNotice,
        OpenSubagentInput,
        SubagentTask,
    )
    from keel.workflows.usage.models import Usage

__all__ = ["ChildRunMethod", "ChildStatusSignal", "RunSubagents", "SubagentHost"]

ChildRunMethod = Callable[[Any, RunInput], Awaitable[RunResult]]
"""`AgentRunWorkflow.run`: what a child runs (passed in, since that class composes this)."""
ChildStatusSignal = Callable[[Any, ChildRunNotice], Awaitable[None]]
"""`AgentRunWorkflow.child_status`: how a child tells its parent what it waits on."""


class SubagentHost(Protocol):
    """What the agent run offers its sub-agents: its state and its event numbers."""

    _state: RunState

    def _take_seqs(self, count: int) -> int: ...


class RunSubagents:
    """Runs `task` calls as child runs; in a child, opens it and keeps its parent told."""

    def __init__(
        self, host: SubagentHost, child_run: ChildRunMethod, child_status: ChildStatusSignal
    ) -> None:
        self._host = host
        self._child_run = child_run
        self._child_status = child_status

    async def run_all(
        self, run: RunInput, calls: list[tuple[int, GateDecision]]
    ) -> dict[int, GateResult]:
        """Run one step's `task` calls as child runs, a bounded number at a time.

        Each child opens its own record (its agent, its prompt from this run's stored
        message), so this history holds only the child's start and end; its answer
        reaches the model through the next LLM call, which stores its report.
        """
        state = self._host._state
        # Shares are fixed before any child runs, so each gets the same part of what is left.
        share = subagents.share_of(run.agent.limits, state, len(calls))
        children = [
            (
                subagents.child_run_id(run.run_id, state.step, ord_),
                decision.call.call_id,
                self._child_input(run, ord_, decision, share),
            )
            for ord_, decision in calls
        ]
        parallel = asyncio.Semaphore(
            run.agent.limits.max_parallel_subagents or run.max_parallel_subagents
        )

        async def one(run_id: str, call_id: str, child: RunInput) -> GateResult:
            async with parallel:
                return await self.run_child(run_id, call_id, child)

        answers = await asyncio.gather(*(one(*child) for child in children))
        return {answer.ord: answer for answer in answers}

    def _child_input(
        self,
        run: RunInput,
        ord_: int,
        decision: GateDecision,
        share: subagents.Share,
    ) -> RunInput:
        state = self._host._state
        last = state.last_llm_ms
        agent = json.loads(decision.canonical_arguments)["agent"]
        task = SubagentTask(
            step=state.step, ord=ord_, event_seq=self._host._take_seqs(2), **share._asdict()
        )
        fast = last is not None and last < timeouts.LLM_LOCAL_BELOW_MS
        return subagents.child_input(run, agent, task, fast_model=fast)

    async def run_child(self, run_id: str, call_id: str, child: RunInput) -> GateResult:
        """Run one child to its end; its usage and tool calls count against this run's limits.

        The child's id comes from this run's step and call, and is never reused, so a
        replayed or retried step finds the child it started rather than starting another.
        """
        state = self._host._state
        task = child.task
        assert task is not None
        record = ChildRun(run_id=run_id, agent=child.agent.name, step=task.step, ord=task.ord)
        state.children[run_id] = record
        tool_calls, usage = 0, Usage()
        try:
            result = await workflow.execute_child_workflow(
                self._child_run,
                child,
                id=run_id,
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
            status: RunStatus = result.status
            tool_calls, usage = result.tool_calls, result.usage
        except ChildWorkflowError as err:
            status = "cancelled" if isinstance(err.cause, CancelledError) else "failed"
        except WorkflowAlreadyStartedError:
            # Started before this run was reset: its record in Postgres answers.
            workflow.logger.warning("sub-agent run %s was already started", run_id)
            status = "failed"
        state.usage = state.usage.plus(usage)
        state.subagent_tool_calls += tool_calls
        state.children[run_id] = subagents.finished(record, status, tool_calls, usage)
        return GateResult(
            step=task.step,
            ord=task.ord,
            call_id=call_id,
            name="task",
            child_run_id=run_id,
            is_error=status != "completed",
            event_seq=self._host._take_seqs(2),
        )

    async def open(self, run: RunInput) -> RunInput:
        """A sub-agent's first act: find its agent and the prompt its parent wrote.

        Done in the child, so the parent's history holds only the child's start and end.
        """
        assert run.task is not None and run.parent_run_id is not None
        plan = await run_activity(
            Subagents.open_subagent,
            OpenSubagentInput(
                run_id=run.run_id,
                parent_run_id=run.parent_run_id,
                tenant_id=run.tenant_id,
                requester=run.requester,
                agent=run.agent.name,
                task=run.task,
            ),
            timeouts.STORE_CALL,
            local=True,
        )
        agent = plan.agent.model_copy(
            update={"limits": subagents.within_share(plan.agent.limits, run.task)}
        )
        opened = run.model_copy(
            update={
                "agent": agent,
                "model": plan.model,
                "workspace": plan.workspace,
                "texts_key": plan.texts_key,
            }
        )
        if plan.fallback_models is not None:
            opened.fallback_models = plan.fallback_models
        return opened

    async def child_status(self, notice: ChildRunNotice) -> None:
        """A sub-agent waits on a person, or no longer: its parent's stream says so."""
        child = self._host._state.children.get(notice.run_id)
        if child is None or child.status not in ("running", "waiting"):
            return
        child.status = notice.status
        child.pending = list(notice.pending)
        await run_activity(
            Subagents.record_child_event,
            ChildEventInput(
                run_id=workflow.info().workflow_id,
                event_seq=self._host._take_seqs(1),
                child=child.model_copy(deep=True),
            ),
            timeouts.STORE_CALL,
            local=True,
        )

    async def tell_parent(self, run: RunInput) -> None:
        """A sub-agent tells its parent what it waits on, so the parent's readers see it."""
        if run.parent_run_id is None or run.trigger != "parent":
            return
        interactions = self._host._state.interactions.values()
        pending = [i.id for i in interactions if i.status == "pending"]
        notice = ChildRunNotice(
            run_id=run.run_id, status="waiting" if pending else "running", pending=pending
        )
        try:
            parent = workflow.get_external_workflow_handle_for(self._child_run, run.parent_run_id)
            await parent.signal(self._child_status, notice)
        except FailureError as err:  # the parent has ended: nobody is listening
            workflow.logger.warning("could not tell parent %s: %s", run.parent_run_id, err)
