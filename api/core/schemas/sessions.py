"""Sessions and their messages as clients create and see them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from keel.api.core.schemas.common import ChosenId, InputText, StoredText
from keel.api.core.schemas.runs import RunPublic


class SessionCreate(BaseModel):
    """Start a conversation with an agent on a workspace."""

    model_config = ConfigDict(extra="forbid")

    agent: StoredText = Field(min_length=1, max_length=64)
    workspace: StoredText = Field(min_length=1, max_length=4096)
    session_id: ChosenId | None = None
    model: StoredText | None = Field(default=None, max_length=200)
    approver: StoredText | None = Field(default=None, pattern=r"^user:[^\s]{1,200}$")
    metadata: dict[StoredText, StoredText] = Field(default_factory=dict, max_length=50)


class SessionMessageCreate(BaseModel):
    """A message to a session: it becomes a run that sees the history."""

    model_config = ConfigDict(extra="forbid")

    input: InputText
    on_busy: Literal["reject", "enqueue", "interrupt"] = "reject"
    run_id: ChosenId | None = None
    approval_expires_after_s: int | None = Field(default=None, ge=1, le=90 * 86_400)
    agent: Literal["auto"] | None = Field(
        default=None,
        description="\"auto\": the router picks this message's agent; none: the session's.",
    )


class SessionMessage(BaseModel):
    """One turn of a session's history."""

    role: Literal["user", "assistant"]
    content: str
    run_id: str
    run_status: str
    created_at: datetime


class SessionPublic(BaseModel):
    id: str
    agent: str
    workspace: str
    model: str | None
    approver: str | None
    created_by: str
    metadata: dict[str, str]
    created_at: datetime


class SessionDetail(SessionPublic):
    messages: list[SessionMessage]
    active_run: str | None
    queued_runs: list[str]


class SessionList(BaseModel):
    sessions: list[SessionPublic]
    next_cursor: str | None


class MessageAccepted(BaseModel):
    run: RunPublic
    position: int = Field(description="0: running now; n: n runs ahead of it.")
    interrupted: str | None = Field(description="The run this message cancelled, if any.")
