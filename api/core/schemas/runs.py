"""Runs as clients create, list and see them, with their sub-agents and coverage."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from keel.activities.store.records import RunRecord
from keel.api.core.run_models import ModelChoice
from keel.api.core.schedules.fields import WebhookUrl
from keel.api.core.schemas.common import ChosenId, InputText, LocalTool, StoredText
from keel.api.core.schemas.usage import UsagePublic, usage_of
from keel.api.core.tenant_ids import in_view
from keel.workflows.run.findings import RecordedFinding
from keel.workflows.run.model_list import split_models


class RunCreate(BaseModel):
    """Start a run of an agent on a workspace."""

    model_config = ConfigDict(extra="forbid")

    agent: StoredText = Field(min_length=1, max_length=64, description="Agent definition name.")
    input: InputText = Field(description="The task for the agent.")
    workspace: StoredText = Field(
        min_length=1, max_length=4096, description="Directory the run works on (inside the root)."
    )
    run_id: ChosenId | None = Field(
        default=None, description="Choose the run id to make the request idempotent."
    )
    session_id: ChosenId | None = Field(
        default=None,
        description="Join (or start) this session: the run sees the session's history.",
    )
    on_busy: Literal["reject", "enqueue", "interrupt"] = Field(
        default="reject",
        description="If the session has an active run: refuse (409), queue, or cancel it.",
    )
    trigger: Literal["api", "cli"] = "api"
    model: ModelChoice | None = Field(
        default=None,
        description="Overrides the model; a list's others each take a step the one before "
        "failed (overloaded, unknown, or a context too long to compact).",
    )

    @field_validator("model")
    @classmethod
    def _model_list(cls, value: str | list[str] | None) -> str | list[str] | None:
        split_models(value)  # an empty list, a name twice: refused with what to fix
        return value

    metadata: dict[StoredText, StoredText] = Field(default_factory=dict, max_length=50)
    approver: StoredText | None = Field(
        default=None,
        pattern=r"^user:[^\s]{1,200}$",
        description="Who else may approve this run's requests (`user:ID`).",
    )
    approval_expires_after_s: int | None = Field(
        default=None, ge=1, le=90 * 86_400, description="How long approval requests wait."
    )
    webhook_url: WebhookUrl | None = Field(
        default=None,
        description="Receives a signed POST when the run waits for approval and when it ends.",
    )
    local_tools: list[LocalTool] = Field(
        default_factory=list,
        max_length=3,
        description=(
            "Read tools this client executes on its own files: each call opens a "
            "`local_tool_result` interaction that the client answers with the output."
        ),
    )
    max_total_tokens: int | None = Field(
        default=None,
        ge=1000,
        le=10_000_000_000,
        description="A ceiling on the tokens of the run and its sub-agents; the agent's own, "
        "if lower, still holds. A run that reaches it stops with stop reason `budget` (a "
        "review ends `completed` with `coverage: partial`).",
    )
    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        le=1_000_000,
        description="A ceiling in US dollars on the model calls of the run and its "
        "sub-agents, by the price table; the agent's own, if lower, still holds. A run that "
        "reaches it stops with stop reason `budget`.",
    )
    route_only: bool = Field(
        default=False,
        description='With `agent: "auto"`: decide which agent fits and report it, run none.',
    )


class RunChildPublic(BaseModel):
    """A sub-agent run below another run, with its own sub-agents."""

    id: str
    agent: str
    status: str
    stop_reason: str | None
    steps: int
    tool_calls: int
    usage: UsagePublic = Field(description="This run's own calls.")
    children: list[RunChildPublic] = Field(default_factory=list)

    @classmethod
    def from_record(cls, run: RunRecord) -> RunChildPublic:
        return cls(
            id=in_view(run.tenant_id, run.id),
            agent=run.agent,
            status=run.status,
            stop_reason=run.stop_reason,
            steps=run.steps,
            tool_calls=run.tool_calls,
            usage=usage_of(run),
        )


class CoveragePublic(BaseModel):
    """What Keel's records show a covering run read (agents with `coverage: files`)."""

    status: Literal["complete", "partial"] = Field(
        description="`partial`: some file the plan had to read was not read whole."
    )
    files_total: int = Field(description="Files the plan had to read.")
    files_covered: int = Field(description="Of those, files some run of the tree read whole.")
    files_skipped: int = Field(description="Files left out by rule (binary, generated...).")
    not_covered: dict[str, str] = Field(
        default_factory=dict, description="Files to read that were not read whole, with why."
    )


class RunPublic(BaseModel):
    """A run as clients see it."""

    id: str
    agent: str
    model: str
    status: str = Field(
        description="`queued`, `running`, `waiting` (live, and it or a sub-agent run waits "
        "on an approval or an answer), `completed`, `failed` or `cancelled`."
    )
    stop_reason: str | None
    error: str | None
    trigger: str
    schedule_id: str | None = None
    requester: str
    session_id: str | None
    parent_run_id: str | None
    workspace: str
    input: str
    steps: int
    tool_calls: int
    usage: UsagePublic
    report: str | None
    findings: list[RecordedFinding] | None = Field(
        default=None,
        description="The findings of the run and its sub-agent runs (file, line, severity, "
        "title, detail, verified, reported_by), from Keel's findings ledger: one per place; "
        "null when none was recorded and the answer had no `findings` block. See "
        "docs/findings.md.",
    )
    findings_error: str | None = Field(
        default=None, description="Why the report's findings block was not taken, if it was not."
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    pending_interactions: list[str] = Field(
        default_factory=list,
        description="Interactions the run (or one of its sub-agents) is waiting on now.",
    )
    children: list[RunChildPublic] = Field(
        default_factory=list, description="Sub-agent runs its `task` calls started (a tree)."
    )
    child_count: int = Field(
        default=0,
        description="How many sub-agent runs it started directly, in lists and in one "
        "run's view alike (`GET /v1/runs?parent=ID` lists them).",
    )
    coverage: CoveragePublic | None = Field(
        default=None,
        description="For a run whose agent has Keel cover its files: what was read, from "
        "Keel's records; the report ends with the same account.",
    )
    total_usage: UsagePublic | None = Field(
        default=None,
        description="Usage and cost of the run and every sub-agent run below it (the sum "
        "of the tree's recorded model calls): what the run cost. `usage` is its own calls.",
    )
    forked_from: str | None = Field(
        default=None, description="The run this one was forked from, if it was (docs/forks.md)."
    )
    forked_at_step: int | None = Field(
        default=None, description="The step of `forked_from` this run's conversation ends at."
    )
    forked_tree: str | None = Field(
        default=None,
        description="The git commit of the original's workspace as it was after that step, "
        "where Keel recorded one (KEEL_WORKSPACE_TREES); fork into a worktree of it to "
        "start from those files.",
    )

    @classmethod
    def from_record(cls, run: RunRecord) -> RunPublic:
        """The run as its tenant knows it: ids without their scope (`api.core.tenant_ids`)."""
        tenant = run.tenant_id
        return cls(
            id=in_view(tenant, run.id),
            agent=run.agent,
            model=run.model,
            status=run.status,
            stop_reason=run.stop_reason,
            error=run.error,
            trigger=run.trigger,
            requester=run.requester,
            schedule_id=run.schedule_id and in_view(tenant, run.schedule_id),
            session_id=run.session_id and in_view(tenant, run.session_id),
            parent_run_id=run.parent_run_id and in_view(tenant, run.parent_run_id),
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
            findings=run.findings.findings
            if run.findings and (run.findings.findings or not run.findings.error)
            else None,
            findings_error=run.findings.error if run.findings else None,
            coverage=coverage_of(run),
            created_at=run.created_at,
            started_at=run.started_at,
            finished_at=run.finished_at,
            forked_from=run.forked_from and in_view(tenant, run.forked_from),
            forked_at_step=run.forked_at_step,
            forked_tree=run.forked_tree,
        )


class RunList(BaseModel):
    runs: list[RunPublic]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page.")


def coverage_of(run: RunRecord) -> CoveragePublic | None:
    record = run.coverage
    if record is None:
        return None
    return CoveragePublic(
        status=record.status,
        files_total=record.files_total,
        files_covered=record.files_covered,
        files_skipped=record.files_skipped,
        not_covered=record.unread,
    )
