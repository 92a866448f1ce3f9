"""Convergence policy: when a run must stop calling tools and answer."""

from __future__ import annotations

from dataclasses import dataclass

from keel.workflows.run import budget
from keel.workflows.run.agent_spec import Limits
from keel.workflows.run.models import RunState, StopReason

FORCE_ANSWER = (
    "You have reached the limit of this run ({reason}). Do not call any more tools: "
    "write your final answer now from what you have found so far."
)
NUDGE_ANSWER = (
    "Your last tool calls found nothing new. If you have enough to answer, write your "
    "final answer now; call a tool only if it will show something you have not seen."
)


@dataclass(frozen=True)
class NextCall:
    """How the next LLM call is made."""

    force_reason: StopReason | None = None
    nudge: str | None = None

    @property
    def tools_allowed(self) -> bool:
        return self.force_reason is None


def hard_limit(state: RunState, limits: Limits) -> StopReason | None:
    """The hard limit the run has reached, if any."""
    if state.step + 1 >= limits.max_steps:
        return "max_steps"
    # A run's sub-agents spend its tool calls (and, through its usage, its tokens) too.
    if state.tool_calls + state.subagent_tool_calls >= limits.max_tool_calls:
        return "max_tool_calls"
    if state.consecutive_failures >= limits.max_consecutive_failures:
        return "max_consecutive_failures"
    if budget.reached(state, limits) is not None:  # tokens or cost, the tree's
        return "budget"
    return None


def plan_next_call(state: RunState, limits: Limits) -> NextCall:
    """Decide whether the next call is free, nudged towards an answer, or forced."""
    reason = hard_limit(state, limits)
    if reason is not None:
        return NextCall(force_reason=reason, nudge=FORCE_ANSWER.format(reason=reason))
    if state.stale_rounds >= limits.max_stale_rounds:
        if state.nudged:
            return NextCall(
                force_reason="no_progress", nudge=FORCE_ANSWER.format(reason="no progress")
            )
        return NextCall(nudge=NUDGE_ANSWER)
    return NextCall()


def record_round(state: RunState, failures: list[bool], *, fresh: bool) -> None:
    """Fold one tool round into the state: progress and the failure streak.

    Progress is an output that repeats none of an earlier step's (`fresh`): the
    store, which keeps every output's hash, checks it, so the history carries none.
    """
    state.stale_rounds = 0 if fresh else state.stale_rounds + 1
    for failed in failures:
        state.consecutive_failures = state.consecutive_failures + 1 if failed else 0
