"""Permission rules: defaults → agent → session, the last match wins, risk decides the rest."""

from __future__ import annotations

import pytest

from keel.workflows.gate.gate import ToolGate
from keel.workflows.gate.permissions import PermissionRule, decide
from keel.workflows.gate.tool_specs import TOOL_SPECS
from keel.workflows.run.step_models import ToolCallRequest


def rule(permission: str, pattern: str, action: str) -> PermissionRule:
    return PermissionRule.model_validate(
        {"permission": permission, "pattern": pattern, "action": action}
    )


AGENT = [
    rule("bash", "pytest*", "allow"),
    rule("bash", "pytest --pdb*", "deny"),
    rule("edit", "docs/*", "allow"),
    rule("write_file", "docs/secret*", "ask"),
    rule("read", "secrets/*", "deny"),
]
SESSION = [rule("bash", "pytest --pdb -x", "allow")]

CASES = [
    # tool, subject, session rules?, expected action
    ("read_file", "src/app.py", False, "allow"),  # default: read allowed
    ("read_file", "secrets/key.pem", False, "deny"),  # agent rule overrides the default
    ("list_files", "secrets/x", False, "deny"),  # a group rule covers every read tool
    ("write_file", "src/app.py", False, "ask"),  # no rule: write risk asks
    ("edit_file", "docs/guide.md", False, "allow"),  # group rule
    ("write_file", "docs/secret.md", False, "ask"),  # later, narrower rule wins
    ("edit_file", "docs/secret.md", False, "allow"),  # that rule names write_file only
    ("write_file", ".git/config", False, "deny"),  # default deny on .git
    ("bash", "pytest -q", False, "allow"),
    ("bash", "pytest --pdb -x", False, "deny"),  # last match wins over the earlier allow
    ("bash", "pytest --pdb -x", True, "allow"),  # the session layer comes last
    ("bash", "make test", False, "ask"),  # exec risk asks
    ("bash", "make test", True, "ask"),
]


@pytest.mark.parametrize(("tool", "subject", "with_session", "expected"), CASES)
def test_last_match_wins(tool: str, subject: str, with_session: bool, expected: str) -> None:
    action, _ = decide(TOOL_SPECS[tool], subject, AGENT, SESSION if with_session else [])
    assert action == expected


def test_the_deciding_rule_is_reported() -> None:
    action, by = decide(TOOL_SPECS["bash"], "pytest --pdb", AGENT)
    assert action == "deny" and by == AGENT[1]
    assert decide(TOOL_SPECS["write_file"], "x.py", AGENT) == ("ask", None)


def test_a_star_permission_matches_every_tool() -> None:
    assert decide(TOOL_SPECS["bash"], "ls", [rule("*", "*", "deny")])[0] == "deny"
    assert decide(TOOL_SPECS["read_file"], "a", [rule("*", "*", "deny")])[0] == "deny"


def test_the_gate_applies_rules_to_the_call_subject() -> None:
    gate = ToolGate(["bash", "write_file", "ask_user"], AGENT)

    def check(name: str, arguments: str, session: list[PermissionRule] | None = None) -> str:
        call = ToolCallRequest(call_id="c", name=name, arguments=arguments)
        return gate.check(call, {}, session).verdict

    assert check("bash", '{"command": ["pytest", "-q"]}') == "run"
    assert check("bash", '{"command": ["pytest", "--pdb", "-x"]}') == "deny"
    assert check("bash", '{"command": ["pytest", "--pdb", "-x"]}', SESSION) == "run"
    assert check("write_file", '{"path": "a.py", "content": ""}') == "ask"
    assert check("ask_user", '{"question": "Which branch?"}') == "ask"


def test_a_denial_tells_the_model_which_rule() -> None:
    gate = ToolGate(["bash"], AGENT)
    call = ToolCallRequest(call_id="c", name="bash", arguments='{"command": ["pytest", "--pdb"]}')
    decision = gate.check(call, {})
    assert decision.verdict == "deny"
    assert "denied by policy" in decision.message and "pytest --pdb*" in decision.message


def test_the_payload_hash_covers_tool_and_canonical_arguments() -> None:
    gate = ToolGate(["write_file"])
    a = gate.check(
        ToolCallRequest(call_id="1", name="write_file", arguments='{"path": "a", "content": "x"}'),
        {},
    )
    b = gate.check(
        ToolCallRequest(call_id="2", name="write_file", arguments='{"content": "x", "path": "a"}'),
        {},
    )
    c = gate.check(
        ToolCallRequest(call_id="3", name="write_file", arguments='{"content": "y", "path": "a"}'),
        {},
    )
    assert a.payload_hash == b.payload_hash != c.payload_hash
    assert len(a.payload_hash) == 64


def test_rules_refuse_unknown_actions() -> None:
    with pytest.raises(ValueError):
        rule("bash", "*", "maybe")
