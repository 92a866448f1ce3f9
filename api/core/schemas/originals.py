"""Reading back the original of a masked value (scope keel:read-original)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["OriginalKindName", "OriginalPublic", "OriginalRead"]

OriginalKindName = Literal["tool-output", "tool-arguments"]


class OriginalRead(BaseModel):
    """Why the original is read; kept in the audit entry written before it is shown."""

    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=500)
    """A sentence for whoever reviews the audit log (a ticket, a request)."""


class OriginalPublic(BaseModel):
    """The original of a masked tool output or arguments, as the tool gave it."""

    kind: OriginalKindName
    run_id: str
    step: int
    call_id: str
    tool: str
    original: str
    """The unmasked text: the output the model read, or the arguments as it sent them."""
    audit_id: int
    """The audit entry of this read, committed before the answer was made."""
