"""Grants as pure rules: the glob intersection, the checks of a scope, the gate's layer."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase

import pytest

from keel.workflows.gate.grants import (
    GrantChange,
    GrantScope,
    LiveGrant,
    apply_change,
    globs_overlap,
    grant_problem,
    rules_with_grants,
)
from keel.workflows.gate.permissions import PermissionRule, decide
from keel.workflows.gate.tool_specs import TOOL_SPECS

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)
PATTERNS = ["*", "a*", "*b", "a?", "[ab]*", "[!a]*", "a/*", "*/b", "?", "ab", "[a-b]/*", ".*",
            "*.*", "[!a-b]", "b*a", "[", "[a", "a[*]"]  # fmt: skip


def test_globs_overlap_exactly_when_some_string_matches_both() -> None:
    strings = ["".join(p) for n in range(5) for p in itertools.product("ab/.[*", repeat=n)]
    for first, second in itertools.product(PATTERNS, repeat=2):
        brute = any(fnmatchcase(s, first) and fnmatchcase(s, second) for s in strings)
        assert globs_overlap(first, second) == brute, (first, second)


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("*", "rm -rf*"),
        ("*-la", "rm -rf*"),
        ("git *", "does not cover"),
        ("ls *", None),
        ("ls -la", None),
    ],
)
def test_a_grant_covers_its_call_and_nothing_a_deny_rule_denies(
    pattern: str, problem: str | None
) -> None:
    rules = [PermissionRule(permission="bash", pattern="rm -rf*", action="deny")]
    said = grant_problem(
        GrantScope(kind="run", pattern=pattern),
        spec=TOOL_SPECS["bash"],
        subject="ls -la",
        agent_rules=rules,
        now=NOW,
        in_session=False,
    )
    assert (said is None) if problem is None else (problem in (said or ""))


def test_a_grant_ends_in_the_future_and_lasts_for_a_session_only_in_one() -> None:
    def problem(scope: GrantScope, in_session: bool = True) -> str | None:
        spec = TOOL_SPECS["write_file"]
        return grant_problem(
            scope, spec=spec, subject="a.txt", agent_rules=[], now=NOW, in_session=in_session
        )

    assert "not in the future" in (problem(GrantScope(kind="run", until=NOW)) or "")
    assert problem(GrantScope(kind="run", until=NOW + timedelta(seconds=1))) is None
    assert "time zone" in (problem(GrantScope(kind="run", until=datetime(2030, 1, 1))) or "")
    assert "not in a session" in (problem(GrantScope(kind="session"), in_session=False) or "")
    assert problem(GrantScope(kind="call", pattern="nothing")) is None  # call: no grant


def test_grants_apply_last_but_never_over_a_deny_and_end_on_time() -> None:
    spec = TOOL_SPECS["write_file"]
    session: list[PermissionRule] = []
    assert rules_with_grants(session, [], NOW, []) is session  # no grants: nothing to pay
    grants = [
        LiveGrant(id="g1", permission="write_file", pattern="*"),
        LiveGrant(id="g2", permission="write_file", pattern="tmp/*", until=NOW),
    ]
    rules = rules_with_grants(session, grants, NOW, [])
    assert decide(spec, "src/a.py", rules)[0] == "allow"
    assert decide(spec, ".git/config", rules)[0] == "deny"  # the built-in deny holds
    only_expired = rules_with_grants(session, grants[1:], NOW, [])
    assert decide(spec, "tmp/x", only_expired)[0] == "ask"


def test_a_revoked_grant_never_comes_back() -> None:
    grants: list[LiveGrant] = []
    revoked: list[str] = []
    grant = LiveGrant(id="g1", permission="bash", pattern="ls*")
    apply_change(grants, revoked, GrantChange(added=[grant, grant]))
    assert [g.id for g in grants] == ["g1"]
    apply_change(grants, revoked, GrantChange(revoked=["g1"]))
    apply_change(grants, revoked, GrantChange(added=[grant]))  # a late, stale announcement
    assert grants == [] and revoked == ["g1"]
