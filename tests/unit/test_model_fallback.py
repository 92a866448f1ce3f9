"""Which model takes a step after a failure, decided in workflow code from the failure."""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

from keel.workflows.error_types import (
    CONTEXT_TOO_LONG,
    LLM_MODEL_UNKNOWN,
    LLM_REQUEST_REJECTED,
    LLM_UNAVAILABLE,
)
from keel.workflows.run import model_fallback
from keel.workflows.run.agent_spec import AgentSpec
from keel.workflows.run.models import RunInput
from keel.workflows.run.step_models import LlmStepInput

RUN = RunInput(
    agent=AgentSpec(name="a"), model="first", fallback_models=["second", "last"], llm_max_attempts=6
)


def test_every_model_but_the_last_gets_a_few_attempts() -> None:
    assert model_fallback.next_model(RUN, "first") == "second"
    assert model_fallback.next_model(RUN, "last") is None
    assert model_fallback.attempts_for(RUN, "first") == model_fallback.FALLBACK_AFTER_ATTEMPTS
    assert model_fallback.attempts_for(RUN, "last") == 6
    single = RUN.model_copy(update={"fallback_models": []})
    assert model_fallback.attempts_for(single, "first") == 6


def test_overload_an_unknown_model_and_an_unfixable_context_move_on_nothing_else() -> None:
    def why(kind: str) -> object:
        return model_fallback.reason_to_move(ApplicationError("failed: " + kind, type=kind))

    assert why(LLM_UNAVAILABLE) == ("overloaded", "failed: " + LLM_UNAVAILABLE)
    assert why(LLM_MODEL_UNKNOWN) == ("unknown_model", "failed: " + LLM_MODEL_UNKNOWN)
    assert why(CONTEXT_TOO_LONG) == ("context_too_long", "failed: " + CONTEXT_TOO_LONG)
    # A request the endpoint refuses (bad key, malformed) fails on every model alike.
    assert why(LLM_REQUEST_REJECTED) is None


def test_a_moved_call_takes_fresh_event_numbers_in_the_order_things_happen() -> None:
    step = LlmStepInput(run_id="r", step=4, model="first", tools=[], event_seq=10, wait_seq=9)
    moved = model_fallback.moved(step, "second", ("overloaded", "529"), 20, waits=True)
    assert moved.model == "second" and moved.moved is not None
    assert (moved.moved.event_seq, moved.wait_seq, moved.event_seq) == (20, 21, 22)
    assert moved.moved.from_model == "first" and moved.moved.reason == "overloaded"
    plain = model_fallback.moved(step, "second", ("overloaded", "529"), 20, waits=False)
    assert (plain.wait_seq, plain.event_seq) == (None, 21)
