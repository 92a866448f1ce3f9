"""Session payloads: submissions, the queue's state, withdrawals and granted rules."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from keel.workflows.gate.grants import LiveGrant
from keel.workflows.gate.permissions import PermissionRule
from keel.workflows.run.models import RunInput


class SessionSubmission(BaseModel):
    """A message posted to a session: the run it becomes, and what to do if busy."""

    run: RunInput
    on_busy: Literal["reject", "enqueue", "interrupt"] = "reject"


class SessionState(BaseModel):
    """Input and query answer of `SessionWorkflow`."""

    session_id: str = ""
    tenant_id: str = "default"
    queue: list[SessionSubmission] = Field(default_factory=list)
    active: str | None = None
    runs_done: int = 0


class SubmitOutcome(BaseModel):
    """Result of the session's `submit` update."""

    run_id: str
    position: int = Field(description="0: starting now; n: n runs ahead of it.")
    interrupted: str | None = Field(default=None, description="The run it cancelled, if any.")


class Withdrawal(BaseModel):
    """Input of the session's `withdraw` update: the run to cancel."""

    run_id: str


class WithdrawOutcome(BaseModel):
    """Result of the session's `withdraw` update."""

    run_id: str
    was: Literal["queued", "active", "unknown"]


class SessionRulesInput(BaseModel):
    """Input of `session_rules`: the session, and whose agent grants the next run takes."""

    session_id: str
    tenant_id: str | None = None
    agent: str | None = None
    requester: str | None = None


class SessionRulesResult(BaseModel):
    """Output of `session_rules`: what `approve_always` granted in this session."""

    rules: list[PermissionRule] = Field(default_factory=list)
    grants: list[LiveGrant] = Field(
        default_factory=list, description="Live grants of the session and of the agent's user."
    )
