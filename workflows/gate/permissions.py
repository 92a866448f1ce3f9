"""Permission rules: which tool calls run, which ask a person, which are refused.

A rule is `{permission, pattern, action}`. `permission` is a tool name, a group
(`read`, `edit`, `bash`, `interact`, `mcp`, `plugin`) or `*`, or for tools from MCP
servers a glob over `mcp:<server>:<tool>` (`mcp:*`, `mcp:tickets:*`), for plugin tools
over `plugin:<plugin>:<tool>`; `pattern` is a glob over
the call's subject (a path, a command line, an MCP call's arguments as JSON). Rules
are merged defaults → agent → session and the last match wins. A write, exec or
external call that no rule matches asks.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from keel.workflows.gate.tool_specs import ToolSpec

Action = Literal["allow", "ask", "deny"]


class PermissionRule(BaseModel):
    """One rule; later rules override earlier ones."""

    model_config = ConfigDict(extra="forbid")

    permission: str = Field(min_length=1, description="Tool name, group, or `*`.")
    pattern: str = Field(default="*", min_length=1, description="Glob over the call's subject.")
    action: Action


DEFAULT_RULES: list[PermissionRule] = [
    PermissionRule(permission="read", pattern="*", action="allow"),
    PermissionRule(permission="interact", pattern="*", action="allow"),
    # Version-control internals are never edited by an agent.
    PermissionRule(permission="edit", pattern=".git/*", action="deny"),
    PermissionRule(permission="edit", pattern="*/.git/*", action="deny"),
]


def rule_matches(rule: PermissionRule, spec: ToolSpec, subject: str) -> bool:
    if rule.permission not in ("*", spec.name, spec.group) and not _named_permission_matches(
        rule.permission, spec
    ):
        return False
    return fnmatchcase(subject, rule.pattern)


def _named_permission_matches(permission: str, spec: ToolSpec) -> bool:
    """`mcp:tickets:*` against an MCP tool's name, `plugin:acme:*` against a plugin tool's."""
    return (
        bool(spec.permission)
        and permission.startswith(("mcp:", "plugin:"))
        and fnmatchcase(spec.permission, permission)
    )


NETWORK_PERMISSION = "network"
"""Not a tool: rules with this permission let `bash` commands whose line matches reach the
network (the sandbox has none otherwise). Only rules naming it exactly count."""


def network_allowed(command_line: str, *layers: list[PermissionRule]) -> bool:
    """Whether the last `network` rule matching the command line allows it."""
    allowed = False
    for layer in layers:
        for rule in layer:
            if rule.permission == NETWORK_PERMISSION and fnmatchcase(command_line, rule.pattern):
                allowed = rule.action == "allow"
    return allowed


def decide(
    spec: ToolSpec, subject: str, *layers: list[PermissionRule]
) -> tuple[Action, PermissionRule | None]:
    """The action for a call, and the rule that decided it (None: the risk default)."""
    decided: tuple[Action, PermissionRule | None] | None = None
    for layer in (DEFAULT_RULES, *layers):
        for rule in layer:
            if rule_matches(rule, spec, subject):
                decided = (rule.action, rule)
    if decided is not None:
        return decided
    return ("ask" if spec.risk in ("write", "exec", "external") else "allow"), None
