"""The HTTP API's wire format, separate from the workflow payloads."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from activities.records import EventRecord, RunRecord


class RunCreate(BaseModel):
    """Start a run of an agent on a workspace."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field(min_length=1, max_length=64, description="Agent definition name.")
    input: str = Field(min_length=1, max_length=200_000, description="The task for the agent.")
    workspace: str = Field(
        min_length=1, max_length=4096, description="Directory the run works on (inside the root)."
    )
    run_id: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$",
        description="Choose the run id to make the request idempotent.",
    )
    session_id: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$",
        description="Join (or start) this session: the run sees the session's history.",
    )
    on_busy: Literal["reject", "enqueue", "interrupt"] = Field(
        default="reject",
        description="If the session has an active run: refuse (409), queue, or cancel it.",
    )
    trigger: Literal["api", "cli"] = "api"
    model: str | None = Field(default=None, max_length=200, description="Overrides the model.")
    metadata: dict[str, str] = Field(default_factory=dict, max_length=50)
    approver: str | None = Field(
        default=None,
        pattern=r"^user:[^\s]{1,200}$",
        description="Who else may approve this run's requests (`user:ID`).",
    )
    approval_expires_after_s: int | None = Field(
        default=None, ge=1, le=90 * 86_400, description="How long approval requests wait."
    )


class UsagePublic(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost_usd: float = Field(default=0.0, description="From the price table in settings.")


class RunPublic(BaseModel):
    """A run as clients see it."""

    id: str
    agent: str
    model: str
    status: str
    stop_reason: str | None
    error: str | None
    trigger: str
    requester: str
    session_id: str | None
    parent_run_id: str | None
    workspace: str
    input: str
    steps: int
    tool_calls: int
    usage: UsagePublic
    report: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    pending_interactions: list[str] = Field(
        default_factory=list, description="Interactions the run is waiting on now."
    )

    @classmethod
    def from_record(cls, run: RunRecord) -> RunPublic:
        return cls(
            id=run.id,
            agent=run.agent,
            model=run.model,
            status=run.status,
            stop_reason=run.stop_reason,
            error=run.error,
            trigger=run.trigger,
            requester=run.requester,
            session_id=run.session_id,
            parent_run_id=run.parent_run_id,
            workspace=run.workspace,
            input=run.input,
            steps=run.steps,
            tool_calls=run.tool_calls,
            usage=UsagePublic(
                prompt_tokens=run.prompt_tokens,
                completion_tokens=run.completion_tokens,
                total_tokens=run.prompt_tokens + run.completion_tokens,
                cost_usd=float(run.cost_usd),
            ),
            report=run.report,
            created_at=run.created_at,
            started_at=run.started_at,
            finished_at=run.finished_at,
        )


class RunList(BaseModel):
    runs: list[RunPublic]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page.")


class EventPublic(BaseModel):
    seq: int
    type: str
    data: dict[str, object]
    created_at: datetime

    @classmethod
    def from_record(cls, event: EventRecord) -> EventPublic:
        return cls(seq=event.seq, type=event.type, data=event.data, created_at=event.created_at)


class EventPage(BaseModel):
    events: list[EventPublic]
    next_after: int = Field(description="Pass as `after` to get the events that follow.")


class AgentPublic(BaseModel):
    name: str
    description: str
    tools: list[str]
    model: str | None


class Health(BaseModel):
    status: Literal["ok"]
    temporal: str
    database: Literal["ok"]


class InteractionDecisionCreate(BaseModel):
    """A person's decision on a pending interaction."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "approve_always", "reject", "answer"]
    payload_hash: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="The `payload_hash` shown with the proposal; required to approve.",
    )
    text: str | None = Field(default=None, max_length=20_000, description="Answer or reason.")


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


class DecisionResult(BaseModel):
    """The decision took."""

    status: Literal["accepted"]
    interaction: InteractionPublic


class SessionCreate(BaseModel):
    """Start a conversation with an agent on a workspace."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field(min_length=1, max_length=64)
    workspace: str = Field(min_length=1, max_length=4096)
    session_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
    model: str | None = Field(default=None, max_length=200)
    approver: str | None = Field(default=None, pattern=r"^user:[^\s]{1,200}$")
    metadata: dict[str, str] = Field(default_factory=dict, max_length=50)


class SessionMessageCreate(BaseModel):
    """A message to a session: it becomes a run that sees the history."""

    model_config = ConfigDict(extra="forbid")

    input: str = Field(min_length=1, max_length=200_000)
    on_busy: Literal["reject", "enqueue", "interrupt"] = "reject"
    run_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
    approval_expires_after_s: int | None = Field(default=None, ge=1, le=90 * 86_400)


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


class TenantUsage(BaseModel):
    """What one tenant has used."""

    tenant_id: str
    runs: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
