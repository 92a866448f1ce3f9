"""What the MCP tools answer with: small models, sent as structured content and as JSON text."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from keel.activities.store.records import RunRecord
from keel.api.core.schemas.interactions import InteractionPublic
from keel.api.core.schemas.runs import RunPublic
from keel.api.core.tenant_ids import in_view


class AgentInfo(BaseModel):
    """One agent a run can be started with."""

    name: str = Field(description="Pass it as `agent` to start_run; also the name of its prompt.")
    description: str


class AgentList(BaseModel):
    agents: list[AgentInfo]


class StartedRun(BaseModel):
    """The run start_run started (or had already started, for a repeated `run_id`)."""

    run_id: str = Field(description="Pass it to get_run and decide.")
    agent: str
    status: str = Field(
        description="`queued` or `running` at first (after a `wait`, where it got to); "
        "get_run follows it."
    )
    session_id: str | None
    pending_interactions: list[str] = Field(
        default_factory=list,
        description="After a `wait`: the approvals and questions it waits on (get_run shows "
        "them, decide answers them).",
    )
    report: str | None = Field(
        default=None, description="After a `wait` that saw the run finish: its report."
    )
    note: str | None = Field(
        default=None,
        description="Set when the run started but the `wait` could not follow it: why, and "
        "that get_run with this run_id follows it (do not start it again).",
    )


class RunDetail(BaseModel):
    """A run and what it waits on now."""

    run: RunPublic
    pending_interactions: list[InteractionPublic] = Field(
        description="Approvals and questions the run waits on; answer each with decide."
    )


class RunSummary(BaseModel):
    """One line of list_runs; get_run has the rest."""

    id: str
    agent: str
    status: str
    stop_reason: str | None
    coverage: str | None = Field(
        default=None,
        description="For a review Keel covers: `complete`, or `partial · N of M files`.",
    )
    created_at: datetime
    finished_at: datetime | None

    @classmethod
    def from_record(cls, run: RunRecord) -> RunSummary:
        covered = run.coverage
        return cls(
            id=in_view(run.tenant_id, run.id),
            agent=run.agent,
            status=run.status,
            stop_reason=run.stop_reason,
            coverage=None
            if covered is None
            else f"{covered.status} · {covered.files_covered} of {covered.files_total} files",
            created_at=run.created_at,
            finished_at=run.finished_at,
        )


class RunSummaries(BaseModel):
    runs: list[RunSummary] = Field(description="Newest first.")
