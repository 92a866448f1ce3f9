"""Rows read from the store, as typed models."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class RunRecord(BaseModel):
    """A run as Postgres knows it."""

    id: str
    tenant_id: str
    session_id: str | None
    agent: str
    model: str
    requester: str
    trigger: str
    parent_run_id: str | None
    workspace: str
    input: str
    status: str
    stop_reason: str | None
    error: str | None
    report: str | None
    steps: int
    tool_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float = 0.0
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    schedule_id: str | None = None


class RecordedCall(BaseModel):
    """A model call as recorded for one step: its tool calls, usage and timing."""

    tool_calls: list[dict[str, Any]]
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int


class EventRecord(BaseModel):
    """One durable event of a run."""

    run_id: str
    seq: int
    type: str
    data: dict[str, object] = Field(default_factory=dict)
    created_at: datetime


class MessageRecord(BaseModel):
    """One stored message of a run's conversation."""

    step: int
    ord: int
    role: str
    content: str | None
    tool_calls: list[dict[str, object]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    sha256: str | None = None
