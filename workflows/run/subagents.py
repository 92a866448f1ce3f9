"""Sub-agent policy: how a `task` call's child run is named, bounded and reported.

Pure code, shared by the agent run (which starts children) and by readers that
must find a child from its parent's call.
"""

from __future__ import annotations

from typing import NamedTuple

from keel.workflows.run.agent_spec import AgentSpec, Limits
from keel.workflows.run.models import RunInput, RunState, RunStatus
from keel.workflows.run.subagent_models import ChildRun, ChildStatus, SubagentTask
from keel.workflows.usage.models import Usage

# A sub-agent may run sub-agents of its own, this many levels below the run people
# started; deeper than that, `task` is not offered, so a cycle of agents ends.
MAX_SUBAGENT_DEPTH = 3
# A child's share of a cost ceiling with nothing left: it may still write its answer.
MIN_COST_SHARE_USD = 0.000001

FINISHED: dict[RunStatus, ChildStatus] = {
    "completed": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
    "queued": "failed",
    "running": "failed",
}


def child_run_id(parent_run_id: str, step: int, ord_: int) -> str:
    """The child's run (and workflow) id: the same for a retried or replayed call."""
    return f"{parent_run_id}-task-{step}-{ord_}"


def task_run_id(parent_run_id: str, task: SubagentTask) -> str:
    """The run id of the child `task` describes: a part of a coverage plan, or a call's."""
    if task.part is not None:
        return f"{parent_run_id}-part-{task.part}"
    return child_run_id(parent_run_id, task.step, task.ord)


def child_input(
    parent: RunInput, agent: str, task: SubagentTask, *, fast_model: bool = False
) -> RunInput:
    """The input of a child run of `agent`: the parent's tenant, requester, approvals and
    retries, one level deeper, for the call `task` describes.

    The child knows its run id and parent from Temporal, and reads its agent, model and
    workspace when it opens: none of them need be in the parent's history.
    """
    return RunInput(
        agent=AgentSpec(name=agent),
        tenant_id=parent.tenant_id,
        requester=parent.requester,
        trigger="parent",
        llm_max_attempts=parent.llm_max_attempts,
        approver=parent.approver,
        approval_expires_after_s=parent.approval_expires_after_s,
        fast_model=fast_model,
        llm_local_below_ms=parent.llm_local_below_ms,
        llm_local_budget_ms=parent.llm_local_budget_ms,
        depth=parent.depth + 1,
        max_parallel_subagents=parent.max_parallel_subagents,
        task=task,
        fallback_models=parent.fallback_models,
        provider_limits=parent.provider_limits,
    )


def interaction_id(run_id: str, parent_run_id: str | None, step: int, ord_: int) -> str:
    """An interaction's id: a sub-agent's carry its run id, so its parent's list stays unique."""
    local = f"ia-{step}-{ord_}"
    return f"{run_id}:{local}" if parent_run_id else local


class Share(NamedTuple):
    """A child's part of its parent's limits, as `SubagentTask` carries it."""

    max_tool_calls: int
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None


def share_of(parent: Limits, state: RunState, share: int) -> Share:
    """A child's part of what the parent has left: tool calls, tokens and cost.

    Tool calls, tokens and cost are shared out, since the parent's limits count its
    children's too; steps and failure streaks are each child's own.
    """
    used_calls = state.tool_calls + state.subagent_tool_calls
    calls = max(1, (parent.max_tool_calls - used_calls) // share)
    tokens = cost = None
    if parent.max_total_tokens is not None:
        tokens = max(1, (parent.max_total_tokens - state.usage.total_tokens) // share)
    if parent.max_cost_usd is not None:
        left = parent.max_cost_usd - state.usage.cost_usd
        cost = max(MIN_COST_SHARE_USD, left / share)
    return Share(calls, tokens, cost)


def _smaller(own: float | None, share: float | None) -> float | None:
    if share is None:
        return own
    return share if own is None else min(own, share)


def within_share(own: Limits, task: SubagentTask) -> Limits:
    """The child's own limits, cut down to the share its parent gave it.

    A part of a coverage plan gets the steps and tool calls its pages need instead:
    the plan sized them, whatever the sub-agent's defaults are.
    """
    tokens = _smaller(own.max_total_tokens, task.max_total_tokens)
    cost = _smaller(own.max_cost_usd, task.max_cost_usd)
    if task.part is not None:
        return own.model_copy(
            update={
                "max_steps": task.max_steps or own.max_steps,
                "max_tool_calls": task.max_tool_calls,
                "max_total_tokens": task.max_total_tokens,
                "max_cost_usd": task.max_cost_usd,
            }
        )
    return own.model_copy(
        update={
            "max_tool_calls": min(own.max_tool_calls, task.max_tool_calls),
            "max_total_tokens": None if tokens is None else int(tokens),
            "max_cost_usd": cost,
        }
    )


def finished(child: ChildRun, status: RunStatus, tool_calls: int, usage: Usage) -> ChildRun:
    """The child's record once its run has ended."""
    return child.model_copy(
        update={
            "status": FINISHED[status],
            "pending": [],
            "tool_calls": tool_calls,
            "usage": usage,
        }
    )


def pending_of_children(state: RunState) -> list[str]:
    """What the run's children wait on now: it shows among the parent's pending interactions."""
    return [ia for child in state.children.values() for ia in child.pending]
