"""Where a fork starts (`ForkPoint`) and the conversation it starts from (`fork_seed`).

A step is one model call: the nudge Keel sent before it (if any), the model's message,
and the results of the tool calls that message asked for. Step 0 is the opening (the
system prompt, the session's earlier turns, the task). The seed is the original's stored
conversation through step N, exactly as its model call after step N would have read it,
then the new user message; pure code over the messages read from Postgres.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from keel.activities.store.records import MessageRecord
from keel.api.core.errors import Invalid

__all__ = ["ForkPoint", "fork_seed", "step_count"]


class ForkPoint(BaseModel):
    """The run a fork starts from (its key), the step, and the new message: part of the
    fork's request hash, so a retry must name the same point."""

    run_id: str
    step: int
    message: str | None = None
    replace_message: bool = False


def step_count(conversation: Sequence[MessageRecord]) -> int:
    """How many steps a run has stored: the last step with a model message."""
    return max((m.step for m in conversation if m.role == "assistant" and m.step > 0), default=0)


def fork_seed(
    conversation: Sequence[MessageRecord], point: ForkPoint, *, shown: str
) -> list[MessageRecord]:
    """The fork's opening conversation; `Invalid` for a step the run does not have (yet)."""
    steps = step_count(conversation)
    if point.step > steps:
        raise Invalid(
            f"Run {shown} has {steps} step{'s' if steps != 1 else ''}; fork at a step "
            f"from 0 to {steps}.",
            field="step",
        )
    kept = [m for m in conversation if m.step <= point.step]
    if not kept:
        raise Invalid(f"Run {shown} has not started yet; fork it once it has.", field="step")
    if point.step > 0:
        _require_answered(kept, point.step, shown)
    if point.message is not None and point.replace_message:
        tasks = [i for i, m in enumerate(kept) if m.step == 0 and m.role == "user"]
        task = tasks[-1]  # the run's own task follows the session's earlier turns
        kept[task] = kept[task].model_copy(update={"content": point.message})
    elif point.message is not None:
        kept.append(MessageRecord(step=point.step, ord=0, role="user", content=point.message))
    return kept


def _require_answered(kept: Sequence[MessageRecord], step: int, shown: str) -> None:
    """A step whose calls have no results yet cannot be sent to a model: refuse it."""
    calls = {
        str(call.get("id"))
        for m in kept
        if m.step == step and m.role == "assistant"
        for call in m.tool_calls or []
    }
    answered = {m.tool_call_id for m in kept if m.step == step and m.role == "tool"}
    if calls - answered:
        raise Invalid(
            f"Step {step} of run {shown} has tool calls without results yet (it is running "
            "or waits on a decision); fork at an earlier step, or when the step has ended.",
            field="step",
        )
