"""What a model step records besides its answer: a wait for a provider's rate limit
(`rate_limited`) and a move to the next model of the run's list (`model_fallback`).

Both are durable events at numbers the workflow gave the step, so a retried attempt
writes nothing twice; the wait also goes to the worker's metrics and log.
"""

from __future__ import annotations

import logging

from temporalio import activity

from keel.activities.llm.limits import OnWait, endpoint_of
from keel.activities.store.run_store import Store
from keel.workflows.run.step_models import LlmStepInput

__all__ = ["note_move", "waiting"]

log = logging.getLogger("keel.llm")


async def note_move(store: Store, step: LlmStepInput) -> None:
    """The `model_fallback` event of a step that moved to this model."""
    moved = step.moved
    if moved is None:
        return
    await store.put_event(
        step.run_id,
        moved.event_seq,
        "model_fallback",
        {
            "step": step.step,
            "from_model": moved.from_model,
            "to_model": step.model,
            "reason": moved.reason,
            "detail": moved.detail,
        },
    )


def waiting(store: Store, step: LlmStepInput, endpoint: str) -> OnWait:
    """What this step does when its call must wait its turn."""
    endpoint = endpoint_of(endpoint)

    async def on_wait(wait_s: float, reason: str) -> None:
        log.info(
            "%s step %s: waiting %.2f s for the rate limit of %s (%s)",
            step.run_id,
            step.step,
            wait_s,
            endpoint,
            reason,
        )
        attributes = {"endpoint": endpoint, "reason": reason}
        try:
            meter = activity.metric_meter()
            meter.create_counter("keel_rate_limit_waits").with_additional_attributes(
                attributes
            ).add(1)
            meter.create_histogram("keel_rate_limit_wait_ms", unit="ms").with_additional_attributes(
                attributes
            ).record(int(wait_s * 1000))
        except Exception as exc:  # metrics never fail a model call
            log.debug("rate limit metrics not recorded: %s", exc)
        if step.wait_seq is not None:
            await store.put_event(
                step.run_id,
                step.wait_seq,
                "rate_limited",
                {
                    "step": step.step,
                    "model": step.model,
                    "endpoint": endpoint,
                    "wait_s": round(wait_s, 3),
                    "reason": reason,
                    "attempt": activity.info().attempt,
                },
            )

    return on_wait
