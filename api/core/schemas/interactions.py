"""Interactions as clients see and decide them."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from keel.activities.credentials.secret_store import MAX_SECRET_CHARS
from keel.api.core.schemas.common import StoredText
from keel.api.core.schemas.grants import GrantPublic, GrantScopeCreate
from keel.api.core.tenant_ids import in_view
from keel.workflows.interactions.models import MAX_LOCAL_RESULT_CHARS, Interaction


class InteractionDecisionCreate(BaseModel):
    """A person's decision on a pending interaction."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "approve_always", "reject", "answer"]
    payload_hash: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="The `payload_hash` shown with the proposal; required to approve.",
    )
    text: StoredText | None = Field(
        default=None,
        max_length=MAX_LOCAL_RESULT_CHARS,
        description=(
            "Answer or reason (at most 20 000 characters), or the output of a "
            "client-executed tool call."
        ),
    )
    secret: SecretStr | None = Field(
        default=None,
        max_length=MAX_SECRET_CHARS,
        description=(
            "The secret a `secret_ref` interaction asks for (with `answer`): kept sealed, "
            "handed to the tool that needs it by reference, never shown or stored readable."
        ),
    )
    arguments: dict[str, object] | None = Field(
        default=None,
        description=(
            "Edited arguments to approve instead of the proposed ones (with `approve` and "
            "the proposal's `payload_hash`). They pass the same checks as the model's call; "
            "the edited call is what runs."
        ),
    )
    grant: GrantScopeCreate | None = Field(
        default=None,
        description="With `approve_always`: how far it reaches (default: this tool on "
        "exactly this subject for the session, or the run outside one).",
    )


class InteractionPublic(BaseModel):
    """An approval request or a question, and its state."""

    id: str
    run_id: str
    kind: str
    status: str
    tool: str
    subject: str
    arguments: dict[str, object]
    payload_hash: str
    risk: str
    question: str | None
    requester: str
    approvers: list[str]
    created_at: datetime
    expires_at: datetime
    decision: str | None
    decided_by: str | None
    decided_at: datetime | None
    answer: str | None
    approved_arguments: dict[str, object] | None = Field(
        default=None, description="The arguments the approver edited in; None: as proposed."
    )
    approved_hash: str | None = Field(
        default=None, description="SHA-256 of the edited payload, which is what ran."
    )

    @classmethod
    def from_interaction(cls, run_id: str, ia: Interaction, *, tenant_id: str) -> InteractionPublic:
        """The interaction as the run's tenant knows it (ids without their scope)."""
        return cls(
            id=in_view(tenant_id, ia.id),
            run_id=in_view(tenant_id, run_id),
            kind=ia.kind,
            status=ia.status,
            tool=ia.tool,
            subject=ia.subject,
            arguments=json.loads(ia.arguments),
            payload_hash=ia.payload_hash,
            risk=ia.risk,
            question=ia.question,
            requester=ia.requester,
            approvers=ia.approvers,
            created_at=ia.created_at,
            expires_at=ia.expires_at,
            decision=ia.decision,
            decided_by=ia.decided_by,
            decided_at=ia.decided_at,
            answer=ia.answer,
            approved_arguments=None
            if ia.approved_arguments is None
            else json.loads(ia.approved_arguments),
            approved_hash=ia.approved_hash,
        )


class DecisionResult(BaseModel):
    """The decision took (`accepted`), or waits with Temporal for a worker (`queued`)."""

    status: Literal["accepted", "queued"] = Field(
        description="`accepted`: the run took it (a repeat of a decision that took says so "
        "too). `queued`: no worker answered, so Temporal keeps it for the run, which applies "
        "it with the same checks when a worker is back; read the interaction to see it land."
    )
    interaction: InteractionPublic
    grant: GrantPublic | None = Field(
        default=None, description="The grant the decision made, if it made one."
    )
