"""What a client sends to start a coordination and what it reads back (the wire format,
apart from the coordinator workflow's own payloads)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, ValidationError, field_validator

from keel.api.core.errors import invalid_request
from keel.api.core.schemas.common import ChosenId, InputText, StoredText
from keel.api.identity.auth import Principal
from keel.workflows.coordinator.models import AgentOutcome, RemoteAgent
from keel.workflows.run.findings import MergedFinding

CoordinationStatus = Literal[
    "running", "cancelling", "completed", "failed", "cancelled", "timed_out"
]
"""`cancelling`: running, asked to cancel; it ends `cancelled` once its workflow has seen it."""


AGENT_NAME_PATTERN = r"^[^\x00-\x1f\x7f]+$"
"""One line of printable text: the name titles a section of the merged report."""


class AgentChoice(BaseModel):
    """One A2A agent a coordination goes to, as a client names it."""

    url: StoredText = Field(
        pattern=r"^https?://\S+$",
        max_length=2048,
        description="The agent's base URL, where its card is served "
        "(`/.well-known/agent-card.json` below it).",
    )
    name: StoredText | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        pattern=AGENT_NAME_PATTERN,
        description="Section title; default: the card's name.",
    )

    @field_validator("url")
    @classmethod
    def _parses(cls, url: str) -> str:
        try:
            _ = urlsplit(url).port  # an unclosed `[` or a port that is no number raise here
        except ValueError:
            raise ValueError(
                "Not a URL Keel can read: write it as http(s)://host[:port]/path."
            ) from None
        return url

    def remote(self) -> RemoteAgent:
        return RemoteAgent(url=self.url, name=self.name)


class CoordinationCreate(BaseModel):
    """`POST /v1/coordinations`: the task, the A2A agents it goes to, and how long each may take."""

    task: InputText = Field(description="The task every agent gets.")
    agents: list[AgentChoice] = Field(
        min_length=1, max_length=20, description="The A2A agents, by base URL (agent card root)."
    )
    timeout_s: int = Field(default=1800, ge=5, le=7 * 86_400, description="Seconds per agent.")
    id: ChosenId | None = Field(
        default=None, description="Choose the id to make the request idempotent."
    )

    @classmethod
    def of(cls, **fields: object) -> CoordinationCreate:
        """The request, or `Invalid` naming the field at fault (for surfaces other than REST)."""
        try:
            return cls.model_validate(fields)
        except ValidationError as exc:
            raise invalid_request(exc) from exc

    def request_hash(self, user: Principal) -> str:
        body = self.model_dump(mode="json", exclude={"id"})
        body["requester"] = [user.tenant_id, user.subject]
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class CoordinationPublic(BaseModel):
    """A coordination as clients see it; `report` and `outcomes` once it has finished."""

    id: str
    status: CoordinationStatus
    requester: str
    created_at: datetime | None
    finished_at: datetime | None
    agents: list[AgentChoice] = Field(
        default_factory=list,
        description="The agents it went to, as asked (for coordinations started before "
        "agents were recorded: those of its outcomes, once it has finished).",
    )
    report: str | None = None
    outcomes: list[AgentOutcome] = Field(default_factory=list)
    findings: list[MergedFinding] = Field(default_factory=list)
    error: str | None = None


class CoordinationList(BaseModel):
    """`GET /v1/coordinations`: the caller's tenant's coordinations, newest first."""

    coordinations: list[CoordinationPublic]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page.")
