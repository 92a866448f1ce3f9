"""Whether a decision can take: the checks a decision meets before it is claimed.

Pure: the interaction as the run holds it, the requests deciding it now, the gate and
the clock; no commands. `RunInteractions.problem_with` asks them for every decision,
as an update's validator and again once the hooks have judged an edit.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime

from keel.workflows.gate.gate import GateDecision, ToolGate
from keel.workflows.interactions.models import (
    MAX_ANSWER_CHARS,
    SECRET_REF_PATTERN,
    Interaction,
    InteractionDecision,
)
from keel.workflows.run.approval_edits import EditRefused
from keel.workflows.run.approval_grants import grant_refusal
from keel.workflows.run.models import RunInput

__all__ = ["decision_problem"]


def decision_problem(
    decision: InteractionDecision,
    interaction: Interaction | None,
    *,
    deciding: set[str],
    gate: ToolGate | None,
    run: RunInput,
    clock: Callable[[], datetime],
    edit: Callable[[Interaction, str], GateDecision],
) -> tuple[str, str] | None:
    """Why `decision` cannot take, as (error type, sentence), or None if it can."""
    if interaction is None:
        return "InteractionNotFound", f"No interaction {decision.interaction_id} in this run."
    if interaction.status != "pending" or clock() >= interaction.expires_at:
        state = "expired" if interaction.status in ("pending", "expired") else "resolved"
        return "InteractionClosed", f"Interaction {interaction.id} is already {state}."
    if interaction.id in deciding:
        return (
            "InteractionClosed",
            f"Interaction {interaction.id} is already being decided by another request.",
        )
    if decision.approver not in interaction.approvers:
        return (
            "NotAnApprover",
            f"{decision.approver} may not decide {interaction.id}; "
            f"allowed: {', '.join(interaction.approvers) or 'nobody'}.",
        )
    if interaction.kind == "local_tool_result":
        if decision.decision not in ("answer", "reject"):
            return (
                "InvalidDecision",
                "A client-executed call takes `answer` with the tool's output as text, "
                "or `reject`.",
            )
        if decision.decision == "answer" and not decision.text:
            return "InvalidDecision", "The result of a client-executed call needs its output."
        return None
    if interaction.kind == "secret_ref":
        if decision.decision not in ("answer", "reject"):
            return "InvalidDecision", "A request for a secret takes `answer` or `reject`."
        if decision.decision == "answer" and not re.match(SECRET_REF_PATTERN, decision.text or ""):
            # The run holds references only: a secret sent as text would sit in history.
            return (
                "InvalidDecision",
                "A secret is given through Keel's API, which keeps it and passes on a "
                "reference: send it as `secret`, or use `keel secret`.",
            )
        return None
    if interaction.kind == "ask_user":
        if decision.decision not in ("answer", "reject"):
            return "InvalidDecision", "A question takes `answer` (with text) or `reject`."
        if decision.decision == "answer" and not (decision.text or "").strip():
            return "InvalidDecision", "An answer needs non-empty text."
        if len(decision.text or "") > MAX_ANSWER_CHARS:
            return "InvalidDecision", f"An answer is at most {MAX_ANSWER_CHARS} characters."
        return None
    if len(decision.text or "") > MAX_ANSWER_CHARS:
        return "InvalidDecision", f"A reason is at most {MAX_ANSWER_CHARS} characters."
    if decision.decision == "answer":
        return "InvalidDecision", "A tool call takes approve, approve_always or reject."
    if decision.decision != "reject" and decision.payload_hash != interaction.payload_hash:
        return (
            "PayloadHashMismatch",
            f"The payload hash does not match the proposal of {interaction.id}; "
            "fetch the interaction again and approve what it shows.",
        )
    if decision.grant is not None:
        problem = grant_refusal(decision, interaction, gate, run, clock())
        if problem is not None:
            return problem
    if decision.arguments is not None:
        if decision.decision != "approve":
            return (
                "InvalidDecision",
                "Edited arguments go with `approve`: an edited call is approved once.",
            )
        try:
            edit(interaction, decision.arguments)
        except EditRefused as err:
            return "EditRefused", str(err)
    return None
