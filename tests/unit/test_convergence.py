"""Convergence policy: when a run must stop calling tools and answer."""

from __future__ import annotations

import pytest

from keel.workflows.run import budget
from keel.workflows.run.agent_spec import Limits
from keel.workflows.run.convergence import (
    FORCE_ANSWER,
    NUDGE_ANSWER,
    NextCall,
    hard_limit,
    plan_next_call,
    record_round,
)
from keel.workflows.run.models import RunState, StopReason
from keel.workflows.usage.models import Usage


def state(**fields: object) -> RunState:
    return RunState.model_validate(fields)


# -- hard limits -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "fields", "expected"),
    [
        pytest.param(Limits(), {}, None, id="fresh-run"),
        # The plan is made before the step it decides: after step 2 of 3 the
        # next call is the third and last, so it is the forced one.
        pytest.param(Limits(max_steps=3), {"step": 1}, None, id="steps-below"),
        pytest.param(Limits(max_steps=3), {"step": 2}, "max_steps", id="steps-last-call"),
        pytest.param(Limits(max_steps=1), {"step": 0}, "max_steps", id="steps-one-call-only"),
        pytest.param(Limits(max_tool_calls=4), {"tool_calls": 3}, None, id="tools-below"),
        pytest.param(Limits(max_tool_calls=4), {"tool_calls": 4}, "max_tool_calls", id="tools"),
        pytest.param(
            Limits(max_tool_calls=4), {"tool_calls": 7}, "max_tool_calls", id="tools-over"
        ),
        pytest.param(Limits(max_tool_calls=0), {}, "max_tool_calls", id="tools-none-allowed"),
        pytest.param(
            Limits(max_consecutive_failures=3),
            {"consecutive_failures": 2},
            None,
            id="failures-below",
        ),
        pytest.param(
            Limits(max_consecutive_failures=3),
            {"consecutive_failures": 3},
            "max_consecutive_failures",
            id="failures",
        ),
        pytest.param(
            Limits(max_total_tokens=1000),
            {"usage": Usage(prompt_tokens=900, completion_tokens=99)},
            None,
            id="tokens-below",
        ),
        pytest.param(
            Limits(max_total_tokens=1000),
            {"usage": Usage(prompt_tokens=900, completion_tokens=100)},
            "budget",
            id="tokens-prompt-plus-completion",
        ),
        pytest.param(
            Limits(max_total_tokens=None),
            {"usage": Usage(prompt_tokens=10**9)},
            None,
            id="no-token-budget",
        ),
        pytest.param(
            Limits(max_steps=2, max_tool_calls=1, max_total_tokens=1),
            {"step": 5, "tool_calls": 5, "usage": Usage(prompt_tokens=5)},
            "max_steps",
            id="steps-reported-first",
        ),
    ],
)
def test_hard_limit(limits: Limits, fields: dict[str, object], expected: StopReason | None) -> None:
    assert hard_limit(state(**fields), limits) == expected


@pytest.mark.parametrize(
    ("limits", "fields", "reason"),
    [
        (Limits(max_steps=3), {"step": 2}, "max_steps"),
        (Limits(max_tool_calls=2), {"tool_calls": 2}, "max_tool_calls"),
        (
            Limits(max_consecutive_failures=1),
            {"consecutive_failures": 1},
            "max_consecutive_failures",
        ),
        (Limits(max_total_tokens=50), {"usage": Usage(completion_tokens=50)}, "budget"),
        (Limits(max_cost_usd=0.5), {"usage": Usage(cost_usd=0.5)}, "budget"),
    ],
)
def test_a_hard_limit_forces_an_answer_without_tools(
    limits: Limits, fields: dict[str, object], reason: StopReason
) -> None:
    plan = plan_next_call(state(**fields), limits)

    assert plan.force_reason == reason
    assert not plan.tools_allowed
    assert plan.nudge == FORCE_ANSWER.format(reason=reason)
    assert f"limit of this run ({reason})" in plan.nudge


# -- ceilings in tokens and cost: the tree's spend, and room for the next call -----------


@pytest.mark.parametrize(
    ("limits", "spent", "latest", "expected"),
    [
        pytest.param(Limits(max_cost_usd=1.0), 0.0, 0.0, None, id="first-call"),
        # Spent 0.5, calls of 0.2: this call and an answer after it end at 0.9.
        pytest.param(Limits(max_cost_usd=1.0), 0.5, 0.2, None, id="room-for-two"),
        # Spent 0.7, calls of 0.2: a free call now would leave no room to answer.
        pytest.param(Limits(max_cost_usd=1.0), 0.7, 0.2, "max_cost_usd", id="answer-now"),
        pytest.param(Limits(max_cost_usd=1.0), 1.0, 0.0, "max_cost_usd", id="spent"),
        pytest.param(Limits(max_cost_usd=1.0), 3.0, 0.0, "max_cost_usd", id="children-overspent"),
        pytest.param(Limits(), 10**6, 10.0, None, id="no-ceiling"),
    ],
)
def test_a_cost_ceiling_leaves_room_for_the_answer(
    limits: Limits, spent: float, latest: float, expected: str | None
) -> None:
    run = state(usage=Usage(cost_usd=spent), last_call=Usage(cost_usd=latest))
    assert budget.reached(run, limits) == expected
    assert hard_limit(run, limits) == ("budget" if expected else None)


def test_a_token_ceiling_counts_the_latest_call_the_same_way() -> None:
    latest = Usage(prompt_tokens=150, completion_tokens=50)
    fits = state(usage=Usage(prompt_tokens=499), last_call=latest)
    assert budget.reached(fits, Limits(max_total_tokens=900)) is None
    tight = state(usage=Usage(prompt_tokens=500), last_call=latest)
    assert budget.reached(tight, Limits(max_total_tokens=900)) == "max_total_tokens"
    # Either ceiling stops the run; the tokens are named first when both are spent.
    both = Limits(max_total_tokens=900, max_cost_usd=0.01)
    spent = state(usage=Usage(prompt_tokens=900, cost_usd=0.02))
    assert budget.reached(spent, both) == "max_total_tokens"
    cost_only = state(usage=Usage(prompt_tokens=10, cost_usd=0.02))
    assert budget.reached(cost_only, both) == "max_cost_usd"


def test_a_growing_conversation_is_expected_to_keep_growing() -> None:
    # Calls of 0.10 then 0.15: the next is expected at 0.20 and the answer after at 0.25.
    first, second = Usage(cost_usd=0.10), Usage(cost_usd=0.15)
    assert budget.grown(Usage(), first) == Usage()
    growth = budget.grown(first, second)
    assert growth.cost_usd == pytest.approx(0.05)
    run = state(usage=Usage(cost_usd=0.25), last_call=second, call_growth=growth)
    assert budget.reached(run, Limits(max_cost_usd=0.71)) is None
    assert budget.reached(run, Limits(max_cost_usd=0.70)) == "max_cost_usd"
    # A call smaller than the one before (after a compaction) grows by nothing.
    assert budget.grown(second, first) == Usage()


def test_an_order_lowers_a_ceiling_and_never_raises_it() -> None:
    own = Limits(max_total_tokens=50_000, max_cost_usd=2.0)
    assert budget.lowered(own, 10_000, 5.0).model_dump() == {
        **own.model_dump(),
        "max_total_tokens": 10_000,
        "max_cost_usd": 2.0,
    }
    assert budget.lowered(Limits(), None, 0.25).max_cost_usd == 0.25
    assert budget.lowered(own, None, None) is own
    assert budget.ceilings_text(own) == "max_total_tokens 50000 and max_cost_usd 2"
    assert budget.ceilings_text(own, "max_cost_usd") == "max_cost_usd 2"


def test_a_hard_limit_beats_a_pending_nudge() -> None:
    plan = plan_next_call(state(step=2, stale_rounds=5), Limits(max_steps=3, max_stale_rounds=1))
    assert plan.force_reason == "max_steps"


def test_a_free_call_has_tools_and_no_nudge() -> None:
    plan = plan_next_call(state(step=3, tool_calls=10, stale_rounds=2), Limits(max_stale_rounds=3))
    assert plan == NextCall()
    assert plan.tools_allowed and plan.nudge is None


def test_max_steps_counts_the_forced_call() -> None:
    limits = Limits(max_steps=3)
    run = RunState()
    plans = []
    while True:
        plan = plan_next_call(run, limits)
        run.step += 1
        plans.append(plan.force_reason)
        if plan.force_reason is not None:
            break
    assert run.step == 3
    assert plans == [None, None, "max_steps"]


# -- no progress ------------------------------------------------------------------------


def test_stale_rounds_nudge_first_then_force() -> None:
    limits = Limits(max_stale_rounds=2)

    below = plan_next_call(state(stale_rounds=1), limits)
    assert below == NextCall()

    nudge = plan_next_call(state(stale_rounds=2), limits)
    assert nudge.force_reason is None and nudge.tools_allowed
    assert nudge.nudge == NUDGE_ANSWER

    forced = plan_next_call(state(stale_rounds=2, nudged=True), limits)
    assert forced.force_reason == "no_progress" and not forced.tools_allowed
    assert forced.nudge == FORCE_ANSWER.format(reason="no progress")

    # Having been nudged does not matter while there is progress.
    assert plan_next_call(state(stale_rounds=0, nudged=True), limits) == NextCall()


def test_a_loop_that_finds_nothing_new_is_nudged_then_forced() -> None:
    """The workflow's loop, with the same file read every round."""
    limits = Limits(max_stale_rounds=2)
    run = RunState()
    plans: list[NextCall] = []
    while True:
        plan = plan_next_call(run, limits)
        if plan.nudge is not None and plan.force_reason is None:
            run.nudged = True
        run.step += 1
        plans.append(plan)
        if plan.force_reason is not None:
            break
        record_round(run, [False], fresh=run.step == 1)

    # Round 1 is new; rounds 2-3 are stale (nudge), round 4 stale again (forced).
    assert run.step == 5
    assert [p.nudge == NUDGE_ANSWER for p in plans] == [False, False, False, True, False]
    assert plans[-1].force_reason == "no_progress"


def test_a_round_with_a_fresh_output_resets_staleness() -> None:
    run = state(stale_rounds=2)

    record_round(run, [False], fresh=True)
    assert run.stale_rounds == 0


def test_a_round_with_nothing_fresh_is_stale() -> None:
    run = state(stale_rounds=1)

    record_round(run, [False], fresh=False)
    assert run.stale_rounds == 2
    # A round whose calls all came from the gate (errors, denials, cached) is stale too.
    record_round(run, [True], fresh=False)
    assert run.stale_rounds == 3


# -- failure streak ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "failures", "after"),
    [
        (0, [True], 1),
        (0, [True, True, True], 3),
        (2, [True], 3),
        (2, [False], 0),
        (0, [True, False, True], 1),
        (3, [True, True, False], 0),
        (4, [], 4),
    ],
)
def test_failure_streak(before: int, failures: list[bool], after: int) -> None:
    run = state(consecutive_failures=before)
    record_round(run, failures, fresh=True)
    assert run.consecutive_failures == after


def test_failure_streak_carries_across_rounds_until_a_success() -> None:
    limits = Limits(max_consecutive_failures=3)
    run = RunState()
    record_round(run, [True, True], fresh=False)
    assert hard_limit(run, limits) is None
    record_round(run, [False, True], fresh=True)
    assert run.consecutive_failures == 1
    record_round(run, [True, True], fresh=False)
    assert hard_limit(run, limits) == "max_consecutive_failures"
