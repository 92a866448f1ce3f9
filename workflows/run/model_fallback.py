"""Fallback models: when a step's model fails in a way the next model of the run's list
can fix, the next one takes the step.

A model moves on when it is overloaded (429, 529 or 5xx after its attempts), does not
exist at its endpoint (404), or cannot take the conversation even after the hardest
compaction (`ContextTooLong`). Every model but the last gets `FALLBACK_AFTER_ATTEMPTS`
attempts, so an outage costs seconds, not the minutes of a full retry budget; the last
keeps the run's. Each step starts again from the first model, so a recovered primary
answers the next step. Pure code: the decision is made from the activity's failure, which
the history records, so replay decides the same.
"""

from __future__ import annotations

from typing import Literal

from temporalio.exceptions import ActivityError, ApplicationError, FailureError

from keel.workflows.error_types import CONTEXT_TOO_LONG, LLM_MODEL_UNKNOWN, LLM_UNAVAILABLE
from keel.workflows.run.models import RunInput
from keel.workflows.run.step_models import LlmStepInput, ModelMove

__all__ = [
    "FALLBACK_AFTER_ATTEMPTS",
    "FALLBACK_PATCH",
    "LIMIT_WAITS_PATCH",
    "attempts_for",
    "moved",
    "next_model",
    "reason_to_move",
]

FALLBACK_PATCH = "model-fallback-v1"
"""Runs with a list of models: a failed step's call moves to the next model."""
LIMIT_WAITS_PATCH = "provider-limit-waits-v1"
"""Runs whose Keel limits a provider: each model call gets a number for its wait's event."""
FALLBACK_AFTER_ATTEMPTS = 3
"""Attempts a model gets before the next one takes the step (the last keeps the run's)."""
DETAIL_CHARS = 200

Reason = Literal["overloaded", "unknown_model", "context_too_long"]
_REASONS: dict[str, Reason] = {
    LLM_UNAVAILABLE: "overloaded",
    LLM_MODEL_UNKNOWN: "unknown_model",
    CONTEXT_TOO_LONG: "context_too_long",
}


def models_of(run: RunInput) -> list[str]:
    """The run's models in the order they are tried."""
    return [run.model, *run.fallback_models]


def next_model(run: RunInput, current: str) -> str | None:
    """The model after `current` in the run's list; None after the last."""
    models = models_of(run)
    if current not in models:
        return None
    at = models.index(current)
    return models[at + 1] if at + 1 < len(models) else None


def attempts_for(run: RunInput, model: str) -> int:
    """A model's attempts at one step: a few when another model follows it."""
    if next_model(run, model) is None:
        return run.llm_max_attempts
    return min(FALLBACK_AFTER_ATTEMPTS, run.llm_max_attempts)


def reason_to_move(err: FailureError) -> tuple[Reason, str] | None:
    """Why the next model should take the step after this failure; None: it should not."""
    cause = err.cause if isinstance(err, ActivityError) else err
    if not isinstance(cause, ApplicationError) or cause.type is None:
        return None
    reason = _REASONS.get(cause.type)
    if reason is None:
        return None
    return reason, str(cause.message)[:DETAIL_CHARS]


def moved(
    step: LlmStepInput, to_model: str, why: tuple[Reason, str], seq: int, *, waits: bool
) -> LlmStepInput:
    """The step's call for the next model, at fresh event numbers from `seq`: the move's
    event, the wait's (when the run's Keel limits providers), the message and usage."""
    reason, detail = why
    move = ModelMove(from_model=step.model, reason=reason, detail=detail, event_seq=seq)
    return step.model_copy(
        update={
            "model": to_model,
            "moved": move,
            "wait_seq": seq + 1 if waits else None,
            "event_seq": seq + (2 if waits else 1),
        }
    )
