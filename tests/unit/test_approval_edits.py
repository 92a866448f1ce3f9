"""The gate an approver's edit passes, and the note the model is told, without a run."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from keel.workflows.gate.gate import ToolGate
from keel.workflows.gate.permissions import PermissionRule
from keel.workflows.interactions.models import Interaction
from keel.workflows.run.approval_edits import EditRefused, check_edit, edit_note

NOW = datetime(2026, 1, 1, tzinfo=UTC)
RULES = [PermissionRule(permission="bash", pattern="rm -rf*", action="deny")]
GATE = ToolGate(["write_file", "bash"], RULES)


def proposal(tool: str, arguments: dict[str, object]) -> Interaction:
    return Interaction(
        id="r:1:2",
        kind="confirm",
        step=1,
        ord=2,
        call_id="c1",
        tool=tool,
        arguments=json.dumps(arguments, sort_keys=True, separators=(",", ":")),
        payload_hash="h" * 64,
        risk="write",
        subject="",
        requester="user:alice",
        approvers=["user:alice"],
        created_at=NOW,
        expires_at=NOW + timedelta(hours=1),
        decided_by="user:alice",
    )


@pytest.mark.parametrize(
    ("tool", "edit", "words"),
    [
        ("write_file", {"path": "../up.txt", "content": "x"}, "outside the run's workspace"),
        ("write_file", {"path": "/etc/passwd", "content": "x"}, "outside"),
        ("write_file", {"path": "a/../../b", "content": "x"}, "outside"),
        ("write_file", {"path": "a.txt", "content": 1}, "content"),
        ("write_file", {"path": "a.txt"}, "content"),
        ("bash", {"command": ["rm", "-rf", "/"]}, "denied by the rule bash rm -rf* deny"),
        ("bash", {"command": ["ls"], "cwd": "/"}, "outside"),
    ],
)
def test_an_edit_the_gate_refuses_says_why(tool: str, edit: dict[str, object], words: str) -> None:
    ia = proposal(tool, {"path": "a.txt", "content": "x"} if tool == "write_file" else {})
    with pytest.raises(EditRefused, match=words.replace("*", r"\*")):
        check_edit(GATE, ia, json.dumps(edit), [])


def test_an_edit_the_rules_would_ask_for_runs_with_its_own_hash() -> None:
    ia = proposal("write_file", {"path": "a.txt", "content": "x"})
    decision = check_edit(GATE, ia, json.dumps({"path": "b/c.txt", "content": "y"}), [])
    assert decision.verdict == "run" and decision.subject == "b/c.txt"
    assert json.loads(decision.canonical_arguments) == {"path": "b/c.txt", "content": "y"}
    assert len(decision.payload_hash) == 64 and decision.payload_hash != ia.payload_hash


def test_the_note_names_who_changed_what() -> None:
    ia = proposal("bash", {"command": ["pytest", "--force"], "cwd": "."})
    note = edit_note(ia, json.dumps({"command": ["pytest"], "cwd": ".", "timeout_s": 60}))
    assert note.startswith("Note: user:alice approved this bash call with changes (")
    assert 'command: ["pytest", "--force"] -> ["pytest"]' in note
    assert "added timeout_s=60" in note and "cwd" not in note.split("(")[1].split(")")[0]
