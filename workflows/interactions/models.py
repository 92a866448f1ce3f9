"""Interactions and decisions: their payloads, kinds, states and caps."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from keel.workflows.gate.grants import GrantScope, LiveGrant, NewGrant
from keel.workflows.gate.permissions import PermissionRule
from keel.workflows.gate.tool_specs import Risk

InteractionKind = Literal["confirm", "ask_user", "local_tool_result", "secret_ref"]
"""`secret_ref`: a secret the user gives (a credential for a backend called as them); the
API keeps it sealed and the run holds only its reference (`secret:<hex>`) as the answer."""

SECRET_REF_PATTERN = r"^secret:[0-9a-f]{32}$"


# What the client that runs a `local_tool_result` call may post back, and an answer's cap.
MAX_LOCAL_RESULT_CHARS = 262_144


MAX_ANSWER_CHARS = 20_000


InteractionStatus = Literal[
    "pending",
    "approved",
    "rejected",
    "expired",
    "answered",
    "executing",
    "executed",
    "failed",
    "cancelled",  # the run ended before anyone decided it (activities/store/interaction_closing)
]


DecisionKind = Literal["approve", "approve_always", "reject", "answer"]


class Interaction(BaseModel):
    """Something the run waits on from outside: a proposal to confirm, a question, or a
    tool call the client that started the run executes and answers with its output."""

    id: str
    kind: InteractionKind
    step: int
    ord: int
    call_id: str
    tool: str
    arguments: str = Field(description="Canonical JSON of the arguments that will run.")
    payload_hash: str = Field(description="SHA-256 of the canonical proposal.")
    risk: Risk
    subject: str
    question: str | None = None
    status: InteractionStatus = "pending"
    requester: str
    approvers: list[str] = Field(description="Who may decide.")
    created_at: datetime
    expires_at: datetime
    decision: DecisionKind | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    answer: str | None = None
    decision_id: str | None = Field(
        default=None, description="Which decision request took, so every record names one."
    )
    approved_arguments: str | None = Field(
        default=None,
        description="Canonical JSON of the arguments the approver edited in; None: as proposed.",
    )
    approved_hash: str | None = Field(
        default=None, description="SHA-256 of the edited proposal, the payload that runs."
    )


class InteractionDecision(BaseModel):
    """Payload of the `resolve_interaction` signal and the `decide` update."""

    interaction_id: str = Field(max_length=200)
    decision: DecisionKind
    approver: str = Field(min_length=1, max_length=256, description="`user:ID` of the decider.")
    payload_hash: str | None = Field(
        default=None, max_length=64, description="The hash the approver saw; required to approve."
    )
    text: str | None = Field(
        default=None,
        max_length=MAX_LOCAL_RESULT_CHARS,
        description="Answer or reason; a client-executed tool's output (its own cap is larger).",
    )
    decision_id: str | None = Field(
        default=None,
        max_length=64,
        description="Names this request; the run makes one up when it is missing.",
    )
    arguments: str | None = Field(
        default=None,
        max_length=MAX_LOCAL_RESULT_CHARS,
        description="JSON of edited arguments to approve instead of the proposal's.",
    )
    grant: GrantScope | None = Field(
        default=None,
        description="With `approve_always`: how far it reaches. None: this tool on exactly "
        "this subject, for the session (or the run, outside one).",
    )


class DecisionOutcome(BaseModel):
    """Result of the `decide` update."""

    interaction_id: str
    status: InteractionStatus
    decision_id: str | None = None
    approved_arguments: str | None = Field(
        default=None, description="The edited arguments that will run; None: as proposed."
    )
    approved_hash: str | None = None
    grant_id: str | None = Field(default=None, description="The grant the decision made.")


class OpenInteractionsInput(BaseModel):
    """Input of `open_interactions`: persist new requests, emit and audit them."""

    run_id: str
    tenant_id: str
    session_id: str | None = None
    interactions: list[Interaction]
    event_seq: int = Field(description="First of one seq per interaction.")


class ResolveInteractionInput(BaseModel):
    """Input of `resolve_interaction`: persist a decision or an expiry, emit and audit it."""

    run_id: str
    tenant_id: str
    session_id: str | None = None
    interaction: Interaction
    grant: LiveGrant | None = Field(default=None, description="The stored grant, if one was made.")
    new_session_rule: PermissionRule | None = None
    event_seq: int
    new_grant: NewGrant | None = Field(
        default=None, description="The grant an `approve_always` makes, stored if it takes."
    )


class ResolveInteractionResult(BaseModel):
    """Output of `resolve_interaction`: the outcome Postgres holds, which the run follows.

    The first decision (or expiry) stored wins; a later one gets the winner back."""

    interaction: Interaction
    grant: LiveGrant | None = Field(default=None, description="The stored grant, if one was made.")
