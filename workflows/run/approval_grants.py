"""Approve always: the grant a decision makes, and why one would reach too far.

Pure functions of the decision, the interaction and the run; `RunInteractions` calls them
when it checks a decision (`problem_with`) and when it stores one (`claim`).
"""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from keel.workflows.gate.gate import ToolGate
    from keel.workflows.gate.grants import NewGrant, grant_problem
    from keel.workflows.interactions.models import Interaction, InteractionDecision
    from keel.workflows.run.models import RunInput

__all__ = ["grant_refusal", "literal_glob", "new_grant"]


def grant_refusal(
    decision: InteractionDecision,
    interaction: Interaction,
    gate: ToolGate | None,
    run: RunInput,
    now: datetime,
) -> tuple[str, str] | None:
    """Why the grant an `approve_always` carries reaches further than it may, as
    (error type, sentence); None if it may be given."""
    assert decision.grant is not None
    if decision.decision != "approve_always":
        return "InvalidDecision", "A grant's scope goes with `approve_always`."
    problem = grant_problem(
        decision.grant,
        spec=gate.spec_of(interaction.tool) if gate is not None else None,
        subject=interaction.subject,
        agent_rules=gate.agent_rules if gate is not None else [],
        now=now,
        in_session=run.session_id is not None,
    )
    return None if problem is None else ("GrantRefused", problem)


def new_grant(
    decision: InteractionDecision,
    interaction: Interaction,
    run: RunInput,
    grant_id: str,
    now: datetime,
) -> NewGrant | None:
    """The grant an `approve_always` makes; None for one that covers this call only.

    Without a scope: this tool on exactly this subject, for the session (or the run)."""
    scope = decision.grant
    kind = scope.kind if scope is not None else ("session" if run.session_id else "run")
    if kind == "call":
        return None
    return NewGrant(
        id=grant_id,
        kind=kind,
        permission=interaction.tool,
        pattern=(scope.pattern if scope else None) or literal_glob(interaction.subject),
        until=scope.until if scope else None,
        granted_by=decision.approver,
        run_id=run.run_id,
        session_id=run.session_id,
        agent=run.agent.name,
        user=interaction.requester,
        interaction_id=interaction.id,
        created_at=now,
    )


def literal_glob(text: str) -> str:
    """A glob that matches exactly `text`."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)
