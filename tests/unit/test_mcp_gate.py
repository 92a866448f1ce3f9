"""Tools of external MCP servers in pure code: names, permissions, the gate, agent files."""

from __future__ import annotations

import json
import re

import pytest

from keel.worker.agent_catalog import AgentDefinitionError, parse_agent
from keel.workflows.gate.gate import GateDecision, ToolGate
from keel.workflows.gate.mcp_models import McpServerSpec
from keel.workflows.gate.mcp_tools import (
    McpToolset,
    mcp_tool_name,
    mcp_tool_spec,
    split_mcp_tool_name,
)
from keel.workflows.gate.models import MessageRef
from keel.workflows.gate.permissions import PermissionRule, decide
from keel.workflows.gate.tool_specs import TOOL_SPECS
from keel.workflows.run.step_models import ToolCallRequest

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TICKETS = McpServerSpec(name="tickets", url="https://mcp.example.com/mcp")
WIKI = McpServerSpec(name="wiki", url="http://wiki.internal:8080/mcp", tools=["search"])
TOOLSET = McpToolset(
    servers=(TICKETS, WIKI),
    discovered=("mcp__tickets__lookup", "mcp__tickets__close", "mcp__wiki__search"),
)


def rule(permission: str, pattern: str, action: str) -> PermissionRule:
    return PermissionRule.model_validate(
        {"permission": permission, "pattern": pattern, "action": action}
    )


def check(
    name: str,
    arguments: str | dict[str, object],
    *,
    rules: list[PermissionRule] | None = None,
    session: list[PermissionRule] | None = None,
    toolset: McpToolset = TOOLSET,
) -> GateDecision:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    gate = ToolGate(["read_file"], rules or [], toolset)
    return gate.check(ToolCallRequest(call_id="c1", name=name, arguments=raw), {}, session)


# -- names ----------------------------------------------------------------------


def test_a_plain_tool_name_is_kept_and_splits_back() -> None:
    assert mcp_tool_name("tickets", "lookup") == "mcp__tickets__lookup"
    assert split_mcp_tool_name("mcp__tickets__lookup") == ("tickets", "lookup")
    assert split_mcp_tool_name("mcp__tickets__a__b") == ("tickets", "a__b")
    assert split_mcp_tool_name("read_file") is None
    assert split_mcp_tool_name("mcp__tickets") is None


@pytest.mark.parametrize("tool", ["search.docs", "a/b", "x" * 80, "ünïcode", ""])
def test_unsafe_or_long_tool_names_become_valid_function_names(tool: str) -> None:
    name = mcp_tool_name("a-long-server-name01", tool)
    assert OPENAI_NAME.match(name), name
    assert name.startswith("mcp__a-long-server-name01__")
    assert split_mcp_tool_name(name) is not None


def test_names_that_sanitise_alike_stay_distinct() -> None:
    assert mcp_tool_name("s", "a.b") != mcp_tool_name("s", "a/b")
    assert mcp_tool_name("s", "a.b") != mcp_tool_name("s", "a_b")


# -- permissions ----------------------------------------------------------------

LOOKUP = mcp_tool_spec("mcp__tickets__lookup")


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        pytest.param([], "ask", id="no-rule-asks"),
        pytest.param([rule("mcp:*", "*", "allow")], "allow", id="every-mcp-tool"),
        pytest.param([rule("mcp:tickets:*", "*", "allow")], "allow", id="the-server"),
        pytest.param([rule("mcp:tickets:lookup", "*", "allow")], "allow", id="the-tool"),
        pytest.param([rule("mcp:wiki:*", "*", "allow")], "ask", id="another-server"),
        pytest.param([rule("mcp:tickets:close", "*", "allow")], "ask", id="another-tool"),
        pytest.param([rule("mcp", "*", "deny")], "deny", id="the-group"),
        pytest.param([rule("mcp__tickets__lookup", "*", "allow")], "allow", id="visible-name"),
        pytest.param([rule("*", "*", "deny")], "deny", id="star"),
        pytest.param(
            [rule("mcp:*", "*", "allow"), rule("mcp:tickets:*", "*", "deny")],
            "deny",
            id="last-match-wins",
        ),
        pytest.param([rule("bash", "*", "allow")], "ask", id="other-groups-do-not-match"),
        pytest.param(
            [rule("mcp:tickets:*", '{"ticket":"T-*"}', "allow")], "allow", id="argument-pattern"
        ),
        pytest.param(
            [rule("mcp:tickets:*", '{"ticket":"X-*"}', "allow")], "ask", id="pattern-misses"
        ),
    ],
)
def test_rules_match_mcp_permission_names(rules: list[PermissionRule], expected: str) -> None:
    action, _ = decide(LOOKUP, '{"ticket":"T-1"}', rules)
    assert action == expected


def test_mcp_rules_do_not_touch_built_in_tools() -> None:
    assert decide(TOOL_SPECS["bash"], "ls", [rule("mcp:*", "*", "allow")])[0] == "ask"
    assert decide(TOOL_SPECS["read_file"], "a", [rule("mcp:*", "*", "deny")])[0] == "allow"


# -- the gate -------------------------------------------------------------------


def test_the_gate_offers_only_discovered_and_allowlisted_tools() -> None:
    toolset = McpToolset(
        servers=(TICKETS, WIKI),
        discovered=("mcp__tickets__lookup", "mcp__wiki__search", "mcp__wiki__delete"),
    )
    gate = ToolGate(["read_file"], [], toolset)
    assert gate.tool_names == ["read_file"]
    assert gate.mcp_tool_names == ["mcp__tickets__lookup", "mcp__wiki__search"]


def test_an_mcp_call_with_no_rule_asks_with_its_arguments_as_subject() -> None:
    decision = check("mcp__tickets__lookup", {"ticket": "T-1", "verbose": True})
    assert decision.verdict == "ask"
    assert decision.spec is not None
    assert decision.spec.risk == "external" and decision.spec.group == "mcp"
    assert decision.subject == '{"ticket":"T-1","verbose":true}'
    assert decision.canonical_arguments == decision.subject


def test_a_server_rule_runs_the_call() -> None:
    decision = check("mcp__tickets__lookup", {"ticket": "T-1"}, rules=[rule("mcp:*", "*", "allow")])
    assert decision.verdict == "run"


def test_approve_always_covers_the_same_call_in_the_session() -> None:
    session = [rule("mcp__tickets__lookup", '{"ticket":"T-1"}', "allow")]
    assert check("mcp__tickets__lookup", {"ticket": "T-1"}, session=session).verdict == "run"
    assert check("mcp__tickets__lookup", {"ticket": "T-2"}, session=session).verdict == "ask"


def test_a_denied_mcp_call_names_the_rule() -> None:
    decision = check("mcp__tickets__close", {}, rules=[rule("mcp:tickets:close", "*", "deny")])
    assert decision.verdict == "deny"
    assert "denied by policy (rule mcp:tickets:close *)" in decision.message


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("mcp__tickets__unknown", id="not-discovered"),
        pytest.param("mcp__wiki__delete", id="not-allowlisted"),
        pytest.param("mcp__other__lookup", id="not-the-agents-server"),
        pytest.param("mcp__tickets", id="malformed"),
    ],
)
def test_an_mcp_tool_the_run_may_not_call_is_unknown(name: str) -> None:
    toolset = McpToolset(
        servers=(TICKETS, WIKI),
        discovered=("mcp__tickets__lookup", "mcp__wiki__search", "mcp__wiki__delete"),
    )
    decision = check(name, {}, toolset=toolset)
    assert decision.verdict == "error"
    assert decision.message == (
        f"Error: unknown tool '{name}'. "
        "Available tools: read_file, mcp__tickets__lookup, mcp__wiki__search."
    )


def test_a_tool_of_a_server_that_was_down_says_so() -> None:
    toolset = McpToolset(servers=(TICKETS, WIKI), discovered=(), unavailable=("wiki",))
    decision = check("mcp__wiki__search", {"q": "x"}, toolset=toolset)
    assert decision.verdict == "error"
    assert decision.message.startswith(
        "Error: the MCP server 'wiki' could not be reached when this run started"
    )


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('["T-1"]', "must be a JSON object"),
        ('{"ticket": ', "are not valid JSON"),
    ],
)
def test_mcp_arguments_must_be_a_json_object(arguments: str, expected: str) -> None:
    decision = check("mcp__tickets__lookup", arguments)
    assert decision.verdict == "error"
    assert expected in decision.message


def test_a_repeated_mcp_call_is_answered_from_the_first() -> None:
    gate = ToolGate([], [rule("mcp:*", "*", "allow")], TOOLSET)
    first = gate.check(
        ToolCallRequest(call_id="a", name="mcp__tickets__lookup", arguments='{"ticket":"T-1"}'), {}
    )
    again = gate.check(
        ToolCallRequest(call_id="b", name="mcp__tickets__lookup", arguments='{ "ticket" : "T-1" }'),
        {first.fingerprint: MessageRef(step=1, ord=2)},
    )
    assert again.verdict == "cached" and again.copy_of == MessageRef(step=1, ord=2)


# -- agent files ----------------------------------------------------------------


def agent(servers: str) -> str:
    return f"---\nname: helpdesk\nmcp_servers: {servers}\n---\nHelp.\n"


def test_an_agent_file_lists_mcp_servers() -> None:
    spec = parse_agent(
        agent('[{name: tickets, url: "https://mcp.example.com/mcp", tools: [lookup]}]'), "a.md"
    )
    assert spec.mcp_servers == [
        McpServerSpec(name="tickets", url="https://mcp.example.com/mcp", tools=["lookup"])
    ]
    assert parse_agent(agent("[]"), "a.md").mcp_servers == []


@pytest.mark.parametrize(
    ("servers", "expected"),
    [
        pytest.param('[{name: t, url: "file:///etc/passwd"}]', "http:// or https://", id="file"),
        pytest.param('[{name: t, url: "mcp.example.com"}]', "http:// or https://", id="no-scheme"),
        pytest.param(
            '[{name: t, url: "https://user:pw@mcp.example.com/"}]',
            "KEEL_MCP_TOKENS",
            id="credentials",
        ),
        pytest.param('[{name: a__b, url: "https://x.example"}]', "name", id="double-underscore"),
        pytest.param('[{name: Tickets, url: "https://x.example"}]', "name", id="upper-case"),
        pytest.param(
            '[{name: t, url: "https://a.example"}, {name: t, url: "https://b.example"}]',
            "repeated: ['t']",
            id="repeated",
        ),
        pytest.param('[{name: t, url: "https://a.example", token: x}]', "token", id="no-tokens"),
    ],
)
def test_bad_mcp_servers_are_refused(servers: str, expected: str) -> None:
    with pytest.raises(AgentDefinitionError) as caught:
        parse_agent(agent(servers), "bad.md")
    assert expected in str(caught.value)
