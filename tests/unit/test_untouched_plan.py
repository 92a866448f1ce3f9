"""The budget's cheap bound: far from the window's edge it plans what `plan_context` plans,
and near the edge it leaves the plan to `plan_context`."""

from __future__ import annotations

import pytest

from keel.activities.context.budget import context_items, untouched_plan
from keel.activities.store.records import MessageRecord
from keel.workflows.context.budget import plan_context


def conversation(steps: int, output_chars: int) -> list[MessageRecord]:
    records = [
        MessageRecord(step=0, ord=0, role="system", content="You review code." * 20),
        MessageRecord(step=0, ord=1, role="user", content="Review this project."),
    ]
    for step in range(1, steps + 1):
        call = {
            "id": f"call_{step}",
            "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "a.py", "n": {step}}}'},
        }
        records.append(
            MessageRecord(step=step, ord=1, role="assistant", content="", tool_calls=[call])
        )
        records.append(
            MessageRecord(
                step=step,
                ord=2,
                role="tool",
                content=f"a.py lines {step}\n" + "x" * output_chars,
                tool_call_id=f"call_{step}",
                name="read_file",
            )
        )
    return records


@pytest.mark.parametrize(
    ("steps", "output_chars", "usable", "calibration"),
    [(1, 10, 100_000, 1.0), (20, 200, 100_000, 1.0), (40, 100, 50_000, 1.7), (5, 0, 8_000, 0.5)],
)
def test_far_from_the_edge_the_bound_plans_what_the_full_plan_does(
    steps: int, output_chars: int, usable: int, calibration: float
) -> None:
    history = conversation(steps, output_chars)
    fast = untouched_plan(history, usable=usable, tools_tokens=900, calibration=calibration)
    full = plan_context(
        context_items(history), usable=usable, tools_tokens=900, calibration=calibration
    )
    assert fast is not None
    assert not full.needs_compaction and full.pruned == 0 and full.capped == 0
    assert fast.messages == full.messages
    assert (fast.estimate, fast.raw, fast.stale) == (full.estimate, full.raw, full.stale)
    assert not fast.needs_compaction


@pytest.mark.parametrize(
    ("steps", "output_chars", "usable"),
    [
        (20, 400, 20_000),  # outputs past the recent share: the full plan prunes
        (3, 30_000, 60_000),  # one output past its cap
        (200, 10, 30_000),  # the calls alone pass what a summary would drop
        (30, 2_000, 30_000),  # near the compaction threshold
    ],
)
def test_near_the_edge_the_bound_leaves_the_plan_to_plan_context(
    steps: int, output_chars: int, usable: int
) -> None:
    history = conversation(steps, output_chars)
    assert untouched_plan(history, usable=usable, tools_tokens=900, calibration=1.0) is None
    full = plan_context(context_items(history), usable=usable, tools_tokens=900)
    assert full.needs_compaction or full.pruned or full.capped
