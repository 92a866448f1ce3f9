"""Payloads of agent memory's activities: recall before a run's first call, facts after.

Only ids and counts cross the workflow boundary; the facts themselves stay in Postgres.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from keel.workflows.run.models import StartRunInput

# The patch that adds memory's activities to a run's command sequence (`workflow.patched`).
MEMORY_PATCH = "agent-memory"


def memory_owner(requester: str) -> str:
    """Whose memories a run reads and writes: the requester's subject (`user:ID` -> `ID`)."""
    return requester.removeprefix("user:")


class RecallInput(BaseModel):
    """Input of `recall_memories`: find the user's memories relevant to the run's input."""

    run_id: str
    tenant_id: str
    user_id: str = Field(description="The principal's subject the memories belong to.")
    session_id: str | None = None
    event_seq: int = Field(description="Seq of the `memory` event that says what was recalled.")
    start: StartRunInput | None = Field(
        default=None, description="Open the run's record first (a fast run's first act)."
    )


class RecallResult(BaseModel):
    """Output of `recall_memories`: how many memories the model is given."""

    count: int = 0


class RememberInput(BaseModel):
    """Input of `remember_facts`: propose facts from a finished run, then store them."""

    run_id: str
    tenant_id: str
    user_id: str
    session_id: str | None = None
    model: str = Field(description="The run's model, which proposes the facts.")


class RememberResult(BaseModel):
    """Output of `remember_facts`: what happened to the facts the model proposed."""

    proposed: int = 0
    stored: int = 0
    updated: int = 0
    withheld: int = Field(default=0, description="Facts not stored because they held a secret.")
    tokens: list[int] = Field(default_factory=list, description="[prompt, completion] spent.")
    cost_usd: float = Field(default=0.0, description="What those tokens cost, by the price table.")
