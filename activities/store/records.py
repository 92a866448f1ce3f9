"""Rows read from the store, as typed models."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from keel.workflows.run.coverage_plan import CoverageRecord
from keel.workflows.run.findings import FindingsRecord
from keel.workflows.run.models import RunInput


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
    request_hash: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    """What the requester attached to the run (`RunCreate.metadata`)."""
    findings: FindingsRecord | None = None
    """The report's structured findings, when it had a findings block."""
    coverage: CoverageRecord | None = None
    """Keel's coverage record (`close_coverage`), for a run whose agent covers files."""
    forked_from: str | None = None
    """The run this one was forked from (`POST /v1/runs/{id}/fork`), if it was."""
    forked_at_step: int | None = None
    """The step of `forked_from` whose conversation this run started from."""
    forked_tree: str | None = None
    """The git commit of `forked_from`'s workspace after that step, where one was recorded."""


class NewRun(BaseModel):
    """A run as recorded before its workflow starts: queued, with its texts."""

    run_id: str
    tenant_id: str
    agent: str
    model: str
    requester: str
    trigger: str
    workspace: str
    input: str
    system_prompt: str | None = None
    """With it, the system prompt and input are stored (as `run_texts`) with the row."""
    session_id: str | None = None
    parent_run_id: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    request_hash: str | None = None
    """SHA-256 of the request that asked for the run; a retry must carry the same."""
    schedule_id: str | None = None
    """The schedule that started the run, if one did."""

    @classmethod
    def of(cls, run: RunInput, *, metadata: dict[str, str], request_hash: str | None) -> NewRun:
        """The row for a run's input (with its texts still inline)."""
        return cls(
            run_id=run.run_id,
            tenant_id=run.tenant_id,
            agent=run.agent.name,
            model=run.model,
            requester=run.requester,
            trigger=run.trigger,
            workspace=run.workspace,
            input=run.input,
            system_prompt=run.agent.system_prompt,
            session_id=run.session_id,
            parent_run_id=run.parent_run_id,
            metadata=metadata,
            request_hash=request_hash,
        )


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
