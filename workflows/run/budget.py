"""Run budgets: ceilings in tokens and in US dollars over a run's whole tree.

A ceiling comes from the agent file's `limits`, lowered by the order that started the
run (API, CLI, schedule): the smaller one wins (`docs/decisions.md`). A run's usage
counts its sub-agents' once they end, and each child gets a share of what is left
(`subagents.share_of`, the coverage parts), so a tree spends no more than its root
allows. Before each model call the run asks `reached`: whether what it has spent, plus
the call it would make and an answer after it, would pass a ceiling. If so, that call
is the run's answer, made without tools, and the run ends with stop reason `budget`.
A conversation grows with every tool round, so the next call is estimated as the latest
one plus what it grew by over the one before, and the answer after it as one more such
step; a run's first call has no estimate and is checked against what is spent alone.

The cost of a call is the figure the LLM step recorded it with (the worker's price
table, `LlmStepResult.cost_usd`), so the workflow decides on the same number on replay.
"""

from __future__ import annotations

from typing import Literal

from temporalio import workflow

from keel.workflows.run.agent_spec import Limits
from keel.workflows.run.models import RunState
from keel.workflows.usage.models import Usage

__all__ = ["Ceiling", "ceilings_text", "grown", "has_ceiling", "lowered", "note_call", "reached"]

# Runs that began before the estimate of the next call: they keep the old check
# (spent alone), so what they decided replays.
ESTIMATES_PATCH = "budget-estimates"

Ceiling = Literal["max_total_tokens", "max_cost_usd"]
"""A ceiling, named as the agent file and the API name it."""


def has_ceiling(limits: Limits) -> bool:
    return limits.max_total_tokens is not None or limits.max_cost_usd is not None


def reached(state: RunState, limits: Limits) -> Ceiling | None:
    """The ceiling the run's next free call and an answer after it would pass, if any."""
    spent, last, growth = state.usage, state.last_call, state.call_growth
    # The next call (last + growth) and the answer after it (last + 2 * growth).
    tokens = limits.max_total_tokens
    if tokens is not None:
        ahead = 2 * last.total_tokens + 3 * growth.total_tokens
        if spent.total_tokens + ahead >= tokens:
            return "max_total_tokens"
    cost = limits.max_cost_usd
    if cost is not None and spent.cost_usd + 2 * last.cost_usd + 3 * growth.cost_usd >= cost:
        return "max_cost_usd"
    return None


def note_call(state: RunState, limits: Limits, spent: Usage) -> None:
    """Keep a model call's figures for the estimate of the next one (runs with a ceiling)."""
    if has_ceiling(limits) and workflow.patched(ESTIMATES_PATCH):
        state.call_growth = grown(state.last_call, spent)
        state.last_call = spent


def grown(before: Usage, after: Usage) -> Usage:
    """How much a call grew over the one before it (none for a run's first call)."""
    if before == Usage():
        return Usage()
    return Usage(
        prompt_tokens=max(0, after.prompt_tokens - before.prompt_tokens),
        completion_tokens=max(0, after.completion_tokens - before.completion_tokens),
        cost_usd=max(0.0, after.cost_usd - before.cost_usd),
    )


def ceilings_text(limits: Limits, only: Ceiling | None = None) -> str:
    """`max_cost_usd 0.05`: the run's ceilings (or the one named) as the user set them."""
    named = []
    if limits.max_total_tokens is not None and only in (None, "max_total_tokens"):
        named.append(f"max_total_tokens {limits.max_total_tokens}")
    if limits.max_cost_usd is not None and only in (None, "max_cost_usd"):
        named.append(f"max_cost_usd {limits.max_cost_usd:g}")
    return " and ".join(named) or "none"


def lowered(limits: Limits, tokens: int | None, cost_usd: float | None) -> Limits:
    """The agent's limits under an order's ceilings. A ceiling is the user's to lower, not
    to raise past the agent file's: the smaller of the two holds (docs/decisions.md)."""
    ceilings: dict[str, float | int] = {}
    if tokens is not None:
        own = limits.max_total_tokens
        ceilings["max_total_tokens"] = tokens if own is None else min(own, tokens)
    if cost_usd is not None:
        own_usd = limits.max_cost_usd
        ceilings["max_cost_usd"] = cost_usd if own_usd is None else min(own_usd, cost_usd)
    return limits.model_copy(update=ceilings) if ceilings else limits
