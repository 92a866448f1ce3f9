"""`ToolGate`: what happens to each tool call the model makes, in pure code."""

from __future__ import annotations

import json

import pytest

from keel.workflows.gate.gate import GateDecision, ToolGate, canonical_json
from keel.workflows.gate.models import MessageRef
from keel.workflows.gate.permissions import PermissionRule
from keel.workflows.gate.tool_specs import TOOL_SPECS
from keel.workflows.run.step_models import ToolCallRequest

READ_TOOLS = ["list_files", "read_file", "search_code"]


def check(
    name: str,
    arguments: str | dict[str, object],
    *,
    allowed: list[str] | None = None,
    answered: dict[str, MessageRef] | None = None,
    call_id: str = "call_0",
) -> GateDecision:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    gate = ToolGate(READ_TOOLS if allowed is None else allowed)
    return gate.check(ToolCallRequest(call_id=call_id, name=name, arguments=raw), answered or {})


# -- errors the model can correct ----------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "allowed", "expected"),
    [
        pytest.param(
            "delete_everything",
            {},
            READ_TOOLS,
            "Error: unknown tool 'delete_everything'. "
            "Available tools: list_files, read_file, search_code.",
            id="unknown-tool",
        ),
        pytest.param(
            "list_files",
            {},
            ["read_file"],
            "Error: unknown tool 'list_files'. Available tools: read_file.",
            id="not-in-allowlist",
        ),
        pytest.param(
            "read_file",
            {"path": "a.py"},
            [],
            "Error: unknown tool 'read_file'. Available tools: none.",
            id="empty-allowlist",
        ),
        pytest.param(
            "read_file",
            '{"path": "a.py"',
            READ_TOOLS,
            "Error: the arguments of read_file are not valid JSON (Expecting ',' delimiter "
            "at position 15). Send a JSON object matching the tool's schema.",
            id="malformed-json",
        ),
        pytest.param(
            "read_file",
            "   ",
            READ_TOOLS,
            "not valid JSON",
            id="blank-arguments",
        ),
    ],
)
def test_calls_the_gate_refuses(
    name: str, arguments: str | dict[str, object], allowed: list[str], expected: str
) -> None:
    decision = check(name, arguments, allowed=allowed)

    assert decision.verdict == "error"
    assert expected in decision.message
    assert decision.message.startswith("Error:")
    assert decision.fingerprint == "" and decision.canonical_arguments == ""
    assert decision.spec is None and decision.copy_of is None
    assert decision.call.name == name


@pytest.mark.parametrize("arguments", ["[]", '["path", "a.py"]', '"a.py"', "3", "null", "true"])
def test_arguments_must_be_a_json_object(arguments: str) -> None:
    decision = check("read_file", arguments)

    assert decision.verdict == "error"
    assert decision.message == "Error: the arguments of read_file must be a JSON object."


@pytest.mark.parametrize(
    ("name", "arguments", "problems"),
    [
        pytest.param("read_file", {}, ["path: Field required"], id="missing-field"),
        pytest.param(
            "read_file",
            {"path": "a.py", "start_line": 0},
            ["start_line: Input should be greater than or equal to 1"],
            id="below-minimum",
        ),
        pytest.param(
            "read_file",
            {"path": 3, "end_line": "x"},
            ["path: Input should be a valid string", "end_line: Input should be a valid integer"],
            id="wrong-types-all-named",
        ),
        pytest.param(
            "search_code",
            {"pattern": ""},
            ["pattern: String should have at least 1 character"],
            id="empty-pattern",
        ),
        pytest.param(
            "search_code",
            {"pattern": "x", "max_results": 5000},
            ["max_results: Input should be less than or equal to 1000"],
            id="above-maximum",
        ),
        pytest.param(
            "read_file",
            {"paht": "a.py"},
            ["path: Field required", "paht: Extra inputs are not permitted"],
            id="misspelt-key",
        ),
        pytest.param(
            "list_files",
            {"pattern": "*.py", "recursive": True},
            ["recursive: Extra inputs are not permitted"],
            id="extra-key",
        ),
    ],
)
def test_invalid_arguments_name_each_field(
    name: str, arguments: dict[str, object], problems: list[str]
) -> None:
    decision = check(name, arguments)

    assert decision.verdict == "error"
    assert decision.message.startswith(f"Error: invalid arguments for {name}: ")
    assert decision.message.endswith("Fix the arguments and call the tool again.")
    for problem in problems:
        assert problem in decision.message


def test_allowlist_keeps_only_known_tools_in_its_order() -> None:
    gate = ToolGate(["search_code", "no_such_tool", "read_file"])
    assert gate.tool_names == ["search_code", "read_file"]
    # A copy: callers cannot widen the allowlist.
    gate.tool_names.append("list_files")
    assert gate.tool_names == ["search_code", "read_file"]


# -- calls that run --------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "canonical"),
    [
        (
            "read_file",
            {"path": "pkg/core.py"},
            '{"end_line":null,"path":"pkg/core.py","start_line":1}',
        ),
        ("list_files", {}, '{"path":".","pattern":"**/*"}'),
        ("list_files", "", '{"path":".","pattern":"**/*"}'),
        (
            "search_code",
            {"pattern": "TODO", "glob": "*.py"},
            '{"glob":"*.py","max_results":100,"path":".","pattern":"TODO"}',
        ),
        ("read_file", {"path": "é.py"}, '{"end_line":null,"path":"é.py","start_line":1}'),
    ],
)
def test_a_valid_call_runs_with_canonical_arguments(
    name: str, arguments: str | dict[str, object], canonical: str
) -> None:
    decision = check(name, arguments)

    assert decision.verdict == "run"
    assert decision.canonical_arguments == canonical
    assert decision.spec is TOOL_SPECS[name]
    assert decision.copy_of is None and decision.message == ""
    assert len(decision.fingerprint) == 24
    int(decision.fingerprint, 16)


def test_the_fingerprint_is_stable_across_versions() -> None:
    # Fingerprints live in run state across continue-as-new; changing the recipe
    # silently turns cached answers into fresh tool calls.
    decision = check("read_file", {"path": "pkg/core.py"})
    assert decision.fingerprint == "4d9c27b3a81047412c816318"


@pytest.mark.parametrize(
    "spelling",
    [
        '{"path": "pkg/core.py"}',
        '{"start_line": 1, "path": "pkg/core.py"}',
        '{"path": "pkg/core.py", "end_line": null, "start_line": 1}',
        '{\n  "end_line": null,\n  "start_line": 1,\n  "path": "pkg/core.py"\n}',
        '{"path": "pkg/core.py", "start_line": "1"}',
    ],
)
def test_spellings_of_the_same_call_share_a_fingerprint(spelling: str) -> None:
    reference = check("read_file", {"path": "pkg/core.py"})
    decision = check("read_file", spelling, call_id="call_other")

    assert decision.verdict == "run"
    assert decision.fingerprint == reference.fingerprint
    assert decision.canonical_arguments == reference.canonical_arguments


def test_different_calls_have_different_fingerprints() -> None:
    fingerprints = {
        check("read_file", {"path": "a.py"}).fingerprint,
        check("read_file", {"path": "b.py"}).fingerprint,
        check("read_file", {"path": "a.py", "start_line": 2}).fingerprint,
        check("list_files", {"path": "a.py"}).fingerprint,
        check("search_code", {"pattern": "a", "path": "a.py"}).fingerprint,
    }
    assert len(fingerprints) == 5


def test_a_call_already_answered_is_cached() -> None:
    first = check("read_file", {"path": "pkg/core.py"})
    earlier = MessageRef(step=2, ord=3)
    answered = {"0" * 24: MessageRef(step=1, ord=2), first.fingerprint: earlier}

    decision = check(
        "read_file", '{"start_line": 1, "path": "pkg/core.py"}', answered=answered, call_id="c9"
    )

    assert decision.verdict == "cached"
    assert decision.copy_of == earlier
    assert decision.fingerprint == first.fingerprint
    assert decision.canonical_arguments == first.canonical_arguments
    assert decision.spec is TOOL_SPECS["read_file"]
    assert decision.call.call_id == "c9"


def test_an_answer_for_another_call_is_not_reused() -> None:
    answered = {check("read_file", {"path": "a.py"}).fingerprint: MessageRef(step=1, ord=2)}
    decision = check("read_file", {"path": "b.py"}, answered=answered)
    assert decision.verdict == "run" and decision.copy_of is None


def test_an_invalid_call_is_an_error_even_if_answered_is_full() -> None:
    answered = {check("read_file", {"path": "a.py"}).fingerprint: MessageRef(step=1, ord=2)}
    decision = check("read_file", {"path": "a.py", "extra": 1}, answered=answered)
    assert decision.verdict == "error" and decision.copy_of is None


def test_canonical_json_sorts_keys_and_drops_spaces() -> None:
    assert canonical_json({"b": [1, {"d": 2, "c": 3}], "a": "é"}) == (
        '{"a":"é","b":[1,{"c":3,"d":2}]}'
    )


@pytest.mark.parametrize(
    ("name", "arguments", "where"),
    [
        ("write_file", {"path": "a\0b.txt", "content": "x"}, "path"),
        ("write_file", {"path": "a.txt", "content": "x\0y"}, "content"),
        ("bash", {"command": ["echo", "a\0b"]}, "command[1]"),
        ("read_file", {"path": "\0"}, "path"),
    ],
)
def test_a_nul_in_any_argument_is_an_error_the_model_can_correct(
    name: str, arguments: dict[str, object], where: str
) -> None:
    decision = check(name, arguments, allowed=["read_file", "write_file", "bash"])

    assert decision.verdict == "error"
    assert f"{where} contains a NUL character" in decision.message
    assert "\0" not in decision.message


def test_network_is_allowed_only_by_a_network_rule_matching_the_command() -> None:
    rules = [
        PermissionRule(permission="*", pattern="*", action="allow"),
        PermissionRule(permission="network", pattern="pip install *", action="allow"),
    ]
    gate = ToolGate(["bash"], rules)

    def network(*command: str) -> bool:
        call = ToolCallRequest(
            call_id="c", name="bash", arguments=json.dumps({"command": list(command)})
        )
        return gate.check(call, {}).network

    assert network("pip", "install", "requests")
    assert not network("curl", "https://example.com")
