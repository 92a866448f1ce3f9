"""`keel run --local-tools` progress: a client-executed call's line, then its answer."""

from __future__ import annotations

from datetime import UTC, datetime

from keel.api.cli.progress import EventLines
from keel.api.core.schemas.events import EventPublic

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _event(seq: int, type_: str, **data: object) -> EventPublic:
    return EventPublic(seq=seq, type=type_, data=data, created_at=AT)


def _resolved(seq: int, iid: str, tool: str, kind: str, status: str) -> EventPublic:
    return _event(
        seq, "interaction_resolved", interaction_id=iid, kind=kind, tool=tool,
        status=status, decided_by="user:alice",
    )  # fmt: skip


def _shown(events: list[EventPublic]) -> list[str]:
    order = EventLines()
    return [line.strip() for event in events for line in order.lines(event)]


def test_a_local_answer_prints_after_the_call_it_answers() -> None:
    # The order the run records them in: the answer, then the call and its result.
    events = [
        _event(1, "interaction_pending", interaction_id="ia-1", kind="local_tool_result"),
        _resolved(2, "ia-1", "read_file", "local_tool_result", "answered"),
        _event(3, "tool_call", name="read_file", arguments={"path": "a.py"}),
        _event(4, "tool_result", name="read_file", size=12),
    ]
    assert _shown(events) == [
        '→ read_file {"path": "a.py"}',
        "✓ ia-1 answered by user:alice",
        "← read_file: 12 bytes",
    ]


def test_two_local_calls_each_get_their_own_answer() -> None:
    events = [
        _resolved(1, "ia-1", "read_file", "local_tool_result", "answered"),
        _resolved(2, "ia-2", "list_files", "local_tool_result", "answered"),
        _event(3, "tool_call", name="read_file", arguments={"path": "a.py"}),
        _event(4, "tool_call", name="list_files", arguments={}),
    ]
    shown = _shown(events)
    assert shown.index("✓ ia-1 answered by user:alice") == 1
    assert shown[-1] == "✓ ia-2 answered by user:alice"


def test_an_approval_still_prints_before_the_call_it_lets_run() -> None:
    events = [
        _resolved(1, "ia-1", "bash", "confirm", "approved"),
        _event(2, "tool_call", name="bash", arguments={"command": "ls"}),
    ]
    assert _shown(events)[0] == "✓ ia-1 approved by user:alice"


def test_a_held_answer_is_not_lost_when_the_run_ends() -> None:
    events = [
        _resolved(1, "ia-1", "read_file", "local_tool_result", "answered"),
        _event(2, "error", error="boom"),
    ]
    assert _shown(events) == ["✓ ia-1 answered by user:alice", "run failed: boom"]


def test_an_interaction_closed_with_its_run_says_so_not_who_decided() -> None:
    closed = _event(
        5, "interaction_resolved", interaction_id="ia-2", kind="approval", tool="bash",
        status="cancelled", decided_by=None,
    )  # fmt: skip
    assert _shown([closed]) == ["✗ ia-2 cancelled: the run ended before a decision"]
