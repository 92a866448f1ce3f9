"""The scripted reviewer writes counts as a person would: `1 file`, `2 files`."""

from __future__ import annotations

from keel.worker.scripted.reviewer import reviewer_reply
from tests.unit.test_context_budget import read_exchange

TASK = [{"role": "system", "content": "Review."}, {"role": "user", "content": "Review it."}]


def _listed(listing: str) -> list[object]:
    call = {"id": "l", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
    return [
        *TASK,
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "l", "content": listing},
    ]


def test_one_file_and_one_finding_are_singular() -> None:
    bug = "a.py (lines 1-1 of 1)\n     1\ty = 2  # BUG: y is wrong"
    report = reviewer_reply([*_listed("a.py (10 bytes)"), *read_exchange("a.py", bug, "r1")])
    assert not report.tool_calls
    assert "Reviewed 1 of 1 file; 1 finding." in report.content


def test_counts_above_one_are_plural() -> None:
    report = reviewer_reply(_listed("a.py (10 bytes)\nb.py (10 bytes)"), may_call=False)
    assert "Reviewed 0 of 2 files; 0 findings." in report.content


def test_a_part_of_one_file_says_this_file() -> None:
    reply = reviewer_reply(_listed("big.py (150000 bytes)"), ["list_files", "read_file", "task"])
    [(name, arguments)] = reply.tool_calls
    assert name == "task"
    assert "Delegating 1 part (1 file)." in reply.content
    assert "review this file;" in str(arguments["prompt"])
    assert "these 1" not in str(arguments["prompt"])
