"""The router's decision matrix: pure code, no I/O, the same answer on every replay.

Given what the rule filter kept and left out, the model's schema-checked answer and
whether the workers can run the agent it named, decide one of `routed`, `refused`,
`clarifying` or `route_only`, with a reason a user can read. A malformed or unsure
answer never routes: it asks (and, after `MAX_CLARIFYING_ROUNDS` questions, refuses).
"""

from __future__ import annotations

from typing import assert_never

from keel.workflows.router.models import (
    Classification,
    Dispatchability,
    ExcludedAgent,
    RouteDecision,
)

# Below this the model's choice is a guess: ask instead.
MIN_CONFIDENCE = 0.5
# Questions a router run asks before it gives up and refuses.
MAX_CLARIFYING_ROUNDS = 2


def agent_to_check(candidates: list[str], classification: Classification) -> str | None:
    """The agent whose dispatchability the matrix needs: the model's pick among candidates."""
    if classification.kind == "agent" and classification.agent in candidates:
        return classification.agent
    return None


def decide(
    *,
    candidates: list[str],
    excluded: list[ExcludedAgent],
    classification: Classification,
    dispatch: Dispatchability | None,
    asked: int,
    route_only: bool = False,
) -> RouteDecision:
    """The decision for one classification round (`asked`: questions asked before it)."""
    if not candidates:
        return RouteDecision(
            outcome="refused",
            reason="No agent is enabled for your tenant and roles; ask an admin to enable one "
            "(PUT /v1/admin/router/tenants/{tenant}) or name an agent directly.",
        )
    kind = classification.kind
    if kind == "malformed":
        return _ask(
            candidates,
            asked,
            None,
            f"The router's classification was unusable ({classification.reason or 'no reason'}).",
        )
    if kind == "clarify":
        return _ask(
            candidates, asked, classification.question, classification.reason or "It is unclear."
        )
    if kind == "none":
        # Never the names of agents the caller's roles exclude: only admins and the audit
        # trail see those (the decision's `excluded`).
        role_bound = any(e.reason == "role" for e in excluded)
        tail = " Some agents are not offered to your roles; ask an admin if you need one." * (
            role_bound
        )
        return RouteDecision(
            outcome="refused",
            reason="None of the agents you may use handles this request"
            f"{': ' + classification.reason.rstrip('.') + '.' if classification.reason else '.'}"
            f"{tail}",
        )
    if kind == "agent":
        return _chosen(candidates, excluded, classification, dispatch, asked, route_only)
    assert_never(kind)


def _chosen(
    candidates: list[str],
    excluded: list[ExcludedAgent],
    classification: Classification,
    dispatch: Dispatchability | None,
    asked: int,
    route_only: bool,
) -> RouteDecision:
    agent = classification.agent or ""
    left_out = {e.name: e.reason for e in excluded}
    if agent not in candidates:
        if left_out.get(agent) == "role":
            return RouteDecision(
                outcome="refused",
                agent=agent,
                reason="The request needs an agent your roles may not use; ask an admin for "
                "a role that may, or rephrase the request.",
            )
        if left_out.get(agent) == "not_enabled":
            return RouteDecision(
                outcome="refused",
                agent=agent,
                reason=f"The request needs the agent '{agent}', which is not enabled for your "
                "tenant; ask an admin to enable it.",
            )
        return _ask(candidates, asked, None, f"The router named an unknown agent '{agent}'.")
    if classification.confidence < MIN_CONFIDENCE:
        question = classification.question or (
            f"Do you want the '{agent}' agent for this? Say what you need done, or name one "
            f"of: {', '.join(candidates)}."
        )
        return _ask(
            candidates,
            asked,
            question,
            f"The router was unsure ({classification.confidence:.2f}) about '{agent}'.",
        )
    assert dispatch is not None, "the chosen agent's dispatchability must be checked first"
    if not dispatch.exists:
        return RouteDecision(
            outcome="refused",
            agent=agent,
            reason=f"The agent '{agent}' is not defined on the workers; ask an operator to "
            "deploy it to every worker.",
        )
    if dispatch.missing_tools:
        return RouteDecision(
            outcome="refused",
            agent=agent,
            reason=f"The agent '{agent}' needs tools no worker can run now "
            f"({', '.join(dispatch.missing_tools)}); ask an operator to make them available.",
        )
    reason = classification.reason or f"'{agent}' fits the request."
    return RouteDecision(
        outcome="route_only" if route_only else "routed", agent=agent, reason=reason
    )


def _ask(candidates: list[str], asked: int, question: str | None, why: str) -> RouteDecision:
    if asked >= MAX_CLARIFYING_ROUNDS:
        return RouteDecision(
            outcome="refused",
            reason=f"{why} The router asked {asked} question(s) and still cannot tell which "
            "agent you need; start the run with the agent's name instead.",
        )
    return RouteDecision(
        outcome="clarifying",
        reason=why,
        question=question
        or f"Which of these should handle your request: {', '.join(candidates)}? "
        "Say what you need done.",
    )
