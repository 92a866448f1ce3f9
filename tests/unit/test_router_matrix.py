"""The router's decision matrix, table-driven: every outcome and its reason, pure code."""

from __future__ import annotations

import pytest

from keel.activities.router.activities import parse_answer
from keel.activities.store.router_store import caller_view
from keel.workflows.agent_roles import roles_admit
from keel.workflows.router import matrix as router
from keel.workflows.router.models import Classification, Dispatchability, ExcludedAgent

CANDIDATES = ["build", "investigate", "review"]
EXCLUDED = [
    ExcludedAgent(name="deploy", reason="role"),
    ExcludedAgent(name="issues", reason="not_enabled"),
]
OK = Dispatchability(exists=True)


def pick(agent: str, confidence: float = 0.9) -> Classification:
    return Classification(kind="agent", agent=agent, confidence=confidence, reason="fits")


CASES: list[tuple[str, dict[str, object], str, str | None, str]] = [
    # (case, overrides of the inputs, outcome, agent, a phrase of the reason)
    ("a confident pick routes", {}, "routed", "review", "fits"),
    ("route_only reports, runs nothing", {"route_only": True}, "route_only", "review", "fits"),
    ("no candidates refuses", {"candidates": []}, "refused", None, "No agent is enabled"),
    (
        "an agent the roles lack refuses",
        {"classification": pick("deploy"), "dispatch": None},
        "refused",
        "deploy",
        "your roles may not use",
    ),
    (
        "an agent the tenant did not enable refuses",
        {"classification": pick("issues"), "dispatch": None},
        "refused",
        "issues",
        "not enabled for your tenant",
    ),
    (
        "an unknown agent asks back, never guesses",
        {"classification": pick("nobody"), "dispatch": None},
        "clarifying",
        None,
        "unknown agent 'nobody'",
    ),
    (
        "a malformed answer asks back",
        {"classification": Classification(kind="malformed", reason="not JSON"), "dispatch": None},
        "clarifying",
        None,
        "unusable",
    ),
    (
        "a malformed answer after the last question refuses",
        {
            "classification": Classification(kind="malformed", reason="not JSON"),
            "dispatch": None,
            "asked": router.MAX_CLARIFYING_ROUNDS,
        },
        "refused",
        None,
        "still cannot tell",
    ),
    (
        "an unclear request asks the model's question",
        {
            "classification": Classification(kind="clarify", question="Which file?"),
            "dispatch": None,
        },
        "clarifying",
        None,
        "unclear",
    ),
    (
        "a low confidence asks back",
        {"classification": pick("review", confidence=0.3)},
        "clarifying",
        None,
        "unsure",
    ),
    (
        "no fitting agent refuses and says some are not offered, naming none",
        {"classification": Classification(kind="none", reason="none ships"), "dispatch": None},
        "refused",
        None,
        "none ships. Some agents are not offered to your roles",
    ),
    (
        "an agent missing on the workers refuses",
        {"dispatch": Dispatchability(exists=False)},
        "refused",
        "review",
        "not defined on the workers",
    ),
    (
        "an agent whose tools cannot run refuses",
        {"dispatch": Dispatchability(exists=True, missing_tools=["bash"])},
        "refused",
        "review",
        "needs tools no worker can run now (bash)",
    ),
]


@pytest.mark.parametrize(("case", "overrides", "outcome", "agent", "phrase"), CASES)
def test_decision_matrix(
    case: str, overrides: dict[str, object], outcome: str, agent: str | None, phrase: str
) -> None:
    inputs: dict[str, object] = {
        "candidates": CANDIDATES,
        "excluded": EXCLUDED,
        "classification": pick("review"),
        "dispatch": OK,
        "asked": 0,
        "route_only": False,
    }
    inputs.update(overrides)
    decision = router.decide(**inputs)  # type: ignore[arg-type]
    assert decision.outcome == outcome, case
    assert decision.agent == agent, case
    assert phrase in decision.reason, (case, decision.reason)
    # The caller reads the reason: it never names an agent their roles exclude.
    role_bound = [e.name for e in EXCLUDED if e.reason == "role"]
    assert not [n for n in role_bound if f"'{n}'" in decision.reason], (case, decision.reason)
    if outcome == "clarifying":
        assert decision.question, case


def test_only_a_listed_pick_needs_its_dispatchability_checked() -> None:
    assert router.agent_to_check(CANDIDATES, pick("review")) == "review"
    assert router.agent_to_check(CANDIDATES, pick("deploy")) is None
    assert router.agent_to_check(CANDIDATES, Classification(kind="malformed")) is None


@pytest.mark.parametrize(
    ("text", "kind", "agent"),
    [
        (
            '{"agent": "review", "confidence": 0.8, "reason": "r", "question": null}',
            "agent",
            "review",
        ),
        ('```json\n{"agent": "review", "confidence": 0.8}\n```', "agent", "review"),
        ('{"agent": null, "confidence": 0, "reason": "r", "question": "Which?"}', "clarify", None),
        (
            '{"agent": null, "confidence": 0, "reason": "nothing fits", "question": null}',
            "none",
            None,
        ),
        ("I would pick review.", "malformed", None),
        ('{"agent": "review", "confidence": 7}', "malformed", None),
        ('{"agent": "review", "confidence": 0.9, "extra": 1}', "malformed", None),
        ('["review"]', "malformed", None),
        # Postgres could store neither the decision nor its audit entry.
        ('{"agent": "review", "confidence": 0.9, "reason": "a\\u0000b"}', "malformed", None),
        ('{"agent": "rev\\u0000iew", "confidence": 0.9}', "malformed", None),
    ],
)
def test_the_answer_is_schema_checked(text: str, kind: str, agent: str | None) -> None:
    classification = parse_answer(text)
    assert classification.kind == kind
    assert classification.agent == agent


def test_the_callers_view_of_a_decision_names_no_agent_their_roles_exclude() -> None:
    excluded = [{"name": "deploy", "reason": "role"}, {"name": "issues", "reason": "not_enabled"}]
    agent, shown, classification = caller_view(
        "deploy", excluded, {"kind": "agent", "agent": "deploy", "reason": "deploy fits"}
    )
    assert agent is None and shown == [{"name": "issues", "reason": "not_enabled"}]
    assert classification == {"kind": "agent", "agent": None, "reason": ""}
    # A pick the roles allow is shown as it is.
    assert caller_view("review", excluded, {"agent": "review"})[::2] == (
        "review",
        {"agent": "review"},
    )


def test_roles_admit_an_open_agent_to_everyone_and_a_bound_one_to_its_roles() -> None:
    assert roles_admit([], [])
    assert roles_admit(["developer"], ["viewer", "developer"])
    assert not roles_admit(["developer"], [])
    assert not roles_admit(["developer"], ["viewer"])
