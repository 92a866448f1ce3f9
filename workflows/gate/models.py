"""Answers the gate gives instead of running a tool, and where stored answers are."""

from __future__ import annotations

from pydantic import BaseModel, Field


class MessageRef(BaseModel):
    """Natural key of a stored message."""

    step: int
    ord: int


class GateResult(BaseModel):
    """A tool answer produced by the gate rather than by running a tool."""

    step: int
    ord: int
    call_id: str
    name: str
    content: str | None = Field(default=None, description="Text given to the model.")
    copy_of: MessageRef | None = Field(default=None, description="Repeat this stored answer.")
    arguments: str = ""
    is_error: bool = True
    event_seq: int
    denied_by: str | None = Field(default=None, description="The rule that denied it, if any.")
    child_run_id: str | None = Field(
        default=None, description="A `task` call's answer: the report of this sub-agent run."
    )
