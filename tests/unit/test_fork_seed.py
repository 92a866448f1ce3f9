"""Where a fork starts: the seed kept from a run's stored conversation, and LangGraph's
checkpoint ids for steps."""

from __future__ import annotations

import pytest

from keel.activities.store.records import MessageRecord
from keel.api.core.errors import Invalid
from keel.api.core.fork_seed import ForkPoint, fork_seed, step_count
from keel.api.langgraph.checkpoints import checkpoint_id, parse_checkpoint, step_values


def msg(step: int, ord_: int, role: str, content: str = "", **kw: object) -> MessageRecord:
    return MessageRecord(step=step, ord=ord_, role=role, content=content, **kw)  # type: ignore[arg-type]


def call(call_id: str) -> dict[str, object]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "list_files", "arguments": "{}"},
    }


# A session's earlier turn (step -1), the opening, two steps, and a third still running.
CONVERSATION = [
    msg(0, 0, "system", "You investigate."),
    msg(-1, 0, "user", "Earlier question"),
    msg(-1, 1, "assistant", "Earlier answer"),
    msg(0, 1, "user", "The task"),
    msg(1, 1, "assistant", "", tool_calls=[call("a"), call("b")]),
    msg(1, 2, "tool", "out a", tool_call_id="a"),
    msg(1, 3, "tool", "out b", tool_call_id="b"),
    msg(2, 0, "user", "Answer now."),
    msg(2, 1, "assistant", "", tool_calls=[call("c")]),
    msg(2, 2, "tool", "out c", tool_call_id="c"),
    msg(3, 1, "assistant", "", tool_calls=[call("d")]),
]


def point(step: int, message: str | None = None, replace: bool = False) -> ForkPoint:
    return ForkPoint(run_id="run-1", step=step, message=message, replace_message=replace)


def test_a_step_is_a_model_call_with_its_results_and_the_nudge_before_it() -> None:
    assert step_count(CONVERSATION) == 3
    seed = fork_seed(CONVERSATION, point(2, "Try the README."), shown="run-1")
    assert seed[:-1] == CONVERSATION[:10]
    assert (seed[-1].role, seed[-1].content) == ("user", "Try the README.")
    opening = fork_seed(CONVERSATION, point(0), shown="run-1")
    assert [m.content for m in opening] == [m.content for m in CONVERSATION[:4]]


def test_a_replaced_task_is_the_runs_own_not_an_earlier_turn() -> None:
    seed = fork_seed(CONVERSATION, point(1, "Another task", replace=True), shown="run-1")
    assert [m.content for m in seed[:4]] == [
        "You investigate.",
        "Earlier question",
        "Earlier answer",
        "Another task",
    ]
    assert seed[4:] == CONVERSATION[4:7]


@pytest.mark.parametrize(
    ("step", "says"),
    [(4, "has 3 steps; fork at a step from 0 to 3"), (3, "tool calls without results yet")],
)
def test_a_step_the_run_lacks_or_has_not_finished_is_refused(step: int, says: str) -> None:
    with pytest.raises(Invalid, match=says) as refused:
        fork_seed(CONVERSATION, point(step), shown="run-1")
    assert refused.value.field == "step"


def test_a_run_that_never_started_has_nothing_to_fork() -> None:
    with pytest.raises(Invalid, match="has not started yet"):
        fork_seed([], point(0), shown="run-1")


def test_checkpoint_ids_name_a_run_and_a_step() -> None:
    assert parse_checkpoint(checkpoint_id("run-1:x", 3)) == ("run-1:x", 3)
    assert parse_checkpoint("run-1") == ("run-1", None)
    for bad in ("run-1@", "@3", "run-1@three"):
        with pytest.raises(Invalid, match="RUN_ID@STEP"):
            parse_checkpoint(bad)
    own = [m for m in CONVERSATION if m.step >= 0]
    values = dict(step_values(own, "run-1"))
    assert list(values) == [1, 2, 3]
    assert [m["type"] for m in values[2]] == ["human", "ai", "tool", "tool", "human", "ai", "tool"]
    assert values[1][1]["tool_calls"][0] == {
        "name": "list_files",
        "args": {},
        "id": "a",
        "type": "tool_call",
    }
