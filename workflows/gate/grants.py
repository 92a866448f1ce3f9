"""Grants: what `approve_always` leaves behind, as permission rules that last.

An approver who answers a call with `approve_always` picks a scope: this call only, or
this tool on a subject or glob for the run, the session, or the agent for this user,
optionally until a time. Each grant is an `allow` rule stored with its grantor; the gate
applies live grants after the defaults, agent and session rules (the last match wins).
A run learns of grants made or revoked while it runs by the `grants_changed` signal, and
of older ones in its input, so a run without grants pays nothing for them.

Everything here is pure: the checks that keep a grant within the approver's authority
(the pattern covers the call, overlaps no deny rule, ends in the future) and the glob
intersection they need.
"""

from __future__ import annotations

from datetime import datetime
from fnmatch import fnmatchcase
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field

from keel.workflows.gate.permissions import DEFAULT_RULES, PermissionRule
from keel.workflows.gate.tool_specs import ToolSpec

__all__ = [
    "GRANTS_PATCH",
    "GrantChange",
    "GrantKind",
    "GrantScope",
    "LiveGrant",
    "NewGrant",
    "apply_change",
    "globs_overlap",
    "grant_problem",
    "rules_with_grants",
]

GRANTS_PATCH = "approve-always-grants"
"""The patch under which `approve_always` stores a grant instead of a session rule."""

GrantKind = Literal["call", "run", "session", "agent"]
MAX_PATTERN_CHARS = 1000


class GrantScope(BaseModel):
    """How far an `approve_always` reaches, as the approver chose."""

    model_config = ConfigDict(extra="forbid")

    kind: GrantKind = Field(
        description="`call`: this call only; `run`, `session`: this tool there; "
        "`agent`: this tool for this agent and this user, in every run."
    )
    pattern: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PATTERN_CHARS,
        description="Glob over the tool's subject; it must cover this call's. "
        "None: exactly this call's subject.",
    )
    until: datetime | None = Field(default=None, description="When the grant ends; None: never.")


class NewGrant(BaseModel):
    """A grant to store with the decision that made it (`resolve_interaction`)."""

    id: str
    kind: Literal["run", "session", "agent"]
    permission: str
    pattern: str
    until: datetime | None = None
    granted_by: str
    run_id: str
    session_id: str | None = None
    agent: str
    user: str = Field(description="The run's requester: whose runs an `agent` grant covers.")
    interaction_id: str
    created_at: datetime


class LiveGrant(BaseModel):
    """A grant as a run applies it."""

    id: str
    permission: str
    pattern: str
    until: datetime | None = None
    kind: str = "run"
    interaction_id: str = ""

    def rule(self) -> PermissionRule:
        return PermissionRule(permission=self.permission, pattern=self.pattern, action="allow")


class GrantChange(BaseModel):
    """Payload of the run's `grants_changed` signal."""

    added: list[LiveGrant] = Field(default_factory=list)
    revoked: list[str] = Field(default_factory=list, description="Ids of revoked grants.")


def apply_change(grants: list[LiveGrant], revoked: list[str], change: GrantChange) -> None:
    """Fold a change into a run's grants; a revoked id never comes back."""
    revoked.extend(gid for gid in change.revoked if gid not in revoked)
    known = {g.id for g in grants}
    for grant in change.added:
        if grant.id not in known and grant.id not in revoked:
            known.add(grant.id)
            grants.append(grant)
    grants[:] = [g for g in grants if g.id not in revoked]


def rules_with_grants(
    session_rules: list[PermissionRule],
    grants: list[LiveGrant],
    now: datetime,
    agent_rules: list[PermissionRule],
) -> list[PermissionRule]:
    """The run's last layer of rules: the session's, then the live grants, then again every
    deny rule of the defaults and the agent, so no grant turns a deny into an allow (an
    agent's rules may have gained a deny since an `agent` grant was made).

    With no grants it is the session's list itself, so a run without grants pays nothing."""
    if not grants:
        return session_rules
    live = [g.rule() for g in grants if g.until is None or g.until > now]
    if not live:
        return session_rules
    denies = [r for r in [*DEFAULT_RULES, *agent_rules] if r.action == "deny"]
    return [*session_rules, *live, *denies]


def grant_problem(
    scope: GrantScope,
    *,
    spec: ToolSpec | None,
    subject: str,
    agent_rules: list[PermissionRule],
    now: datetime,
    in_session: bool,
) -> str | None:
    """Why `scope` may not be granted for a call on `subject`, as a sentence; None if it may."""
    if scope.kind == "call":
        return None
    if scope.kind == "session" and not in_session:
        return "This run is not in a session, so a grant cannot last for one; choose run or agent."
    if scope.until is not None:
        if scope.until.tzinfo is None:
            return "The grant's `until` needs a time zone (for example 2026-12-31T18:00:00Z)."
        if scope.until <= now:
            return f"The grant's `until` ({scope.until.isoformat()}) is not in the future."
    if scope.pattern is None:
        return None  # exactly the subject that asked: no deny rule matched it
    if not fnmatchcase(subject, scope.pattern):
        return (
            f"The pattern '{scope.pattern}' does not cover this call's subject '{subject}'; "
            "a grant must cover the call it answers."
        )
    if spec is None:
        return None
    # The built-in denies (`.git`) hold over every grant at the gate (`rules_with_grants`);
    # a pattern that overlaps one of the agent's own is wider than the agent's owner allows.
    for rule in agent_rules:
        if rule.action != "deny" or not _names_tool(rule, spec):
            continue
        if globs_overlap(rule.pattern, scope.pattern):
            return (
                f"The pattern '{scope.pattern}' would also cover what the rule "
                f"`{rule.permission} {rule.pattern}` denies; a grant cannot be wider than the "
                "rules. Choose a narrower pattern."
            )
    return None


def _names_tool(rule: PermissionRule, spec: ToolSpec) -> bool:
    """Whether `rule` is about this tool, whatever the subject."""
    if rule.permission in ("*", spec.name, spec.group):
        return True
    return (
        bool(spec.permission)
        and rule.permission.startswith(("mcp:", "plugin:"))
        and fnmatchcase(spec.permission, rule.permission)
    )


# -- glob intersection -------------------------------------------------------------

_Token = tuple[str, object]
"""("lit", char) | ("any", None) | ("star", None) | ("set", (negated, [(lo, hi), ...]))."""


def _tokens(pattern: str) -> list[_Token]:
    """`fnmatch`'s reading of a glob: `*`, `?`, `[seq]`, `[!seq]`; a lone `[` is literal."""
    out: list[_Token] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            if not out or out[-1][0] != "star":
                out.append(("star", None))
        elif c == "?":
            out.append(("any", None))
        elif c == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(("lit", "["))
                continue
            body = pattern[i:j]
            i = j + 1
            negated = body.startswith("!")
            if negated:
                body = body[1:]
            ranges: list[tuple[str, str]] = []
            k = 0
            while k < len(body):
                if k + 2 < len(body) and body[k + 1] == "-":
                    if body[k] <= body[k + 2]:
                        ranges.append((body[k], body[k + 2]))
                    k += 3
                else:
                    ranges.append((body[k], body[k]))
                    k += 1
            out.append(("set", (negated, ranges)))
        else:
            out.append(("lit", c))
    return out


def _accepts(token: _Token, c: str) -> bool:
    kind, value = token
    if kind == "lit":
        return value == c
    if kind == "any":
        return True
    negated, ranges = cast("tuple[bool, list[tuple[str, str]]]", value)
    inside = any(lo <= c <= hi for lo, hi in ranges)
    return inside != negated


def _alphabet(*patterns: list[_Token]) -> set[str]:
    """One character of every class the patterns tell apart."""
    points: set[int] = set()
    for tokens in patterns:
        for kind, value in tokens:
            if kind == "lit":
                points.add(ord(str(value)))
            elif kind == "set":
                for lo, hi in value[1]:  # type: ignore[index]
                    points.update((ord(lo), ord(hi)))
    chars = {"a"}
    for p in points:
        chars.update(chr(q) for q in (p - 1, p, p + 1) if 0 <= q <= 0x10FFFF)
    return chars


def globs_overlap(first: str, second: str) -> bool:
    """Whether some string matches both globs (as `fnmatchcase` matches)."""
    a, b = _tokens(first), _tokens(second)
    alphabet = _alphabet(a, b)

    def closure(state: tuple[int, int]) -> set[tuple[int, int]]:
        seen = {state}
        todo = [state]
        while todo:
            i, j = todo.pop()
            for nxt in (
                (i + 1, j) if i < len(a) and a[i][0] == "star" else None,
                (i, j + 1) if j < len(b) and b[j][0] == "star" else None,
            ):
                if nxt is not None and nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    def steps(tokens: list[_Token], i: int, c: str) -> list[int]:
        if i >= len(tokens):
            return []
        if tokens[i][0] == "star":
            return [i]
        return [i + 1] if _accepts(tokens[i], c) else []

    frontier = closure((0, 0))
    visited = set(frontier)
    while frontier:
        if (len(a), len(b)) in frontier:
            return True
        nxt: set[tuple[int, int]] = set()
        for i, j in frontier:
            for c in alphabet:
                for i2 in steps(a, i, c):
                    for j2 in steps(b, j, c):
                        for state in closure((i2, j2)):
                            if state not in visited:
                                visited.add(state)
                                nxt.add(state)
        frontier = nxt
    return False
