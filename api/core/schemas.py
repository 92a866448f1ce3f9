"""The HTTP API's wire format, separate from the workflow payloads."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field

from keel.activities.store.records import EventRecord, RunRecord
from keel.api.core.plain_errors import task_text
from keel.api.core.schedules.fields import CronText, TimeZoneName, WebhookUrl
from keel.api.core.tenant_ids import in_view, in_view_data
from keel.api.evals.results import EvalReport
from keel.workflows.gate.tool_specs import TOOL_SPECS
from keel.workflows.interactions.models import MAX_LOCAL_RESULT_CHARS, Interaction
from keel.workflows.router.models import ROUTER_AGENT
from keel.workflows.run.agent_spec import AgentSpec
from keel.workflows.run.findings import RecordedFinding
from keel.workflows.usage.models import TreeUsage


def storable(value: str) -> str:
    """Refuse text with NUL characters, which Postgres cannot store, before it reaches a query.

    (Lone surrogates, which it cannot store either, pydantic refuses on its own.)
    """
    if "\x00" in value:
        raise ValueError("Text may not contain NUL (\\u0000) characters; remove them and retry.")
    return value


StoredText = Annotated[str, AfterValidator(storable)]
"""A string from a request that ends up in Postgres."""

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
"""Run and session ids a client chooses: what Temporal and URLs take without escaping."""
MAX_INPUT_CHARS = 200_000
"""The longest task a run takes, on every surface."""
ChosenId = Annotated[str, Field(pattern=ID_PATTERN)]
# The tools a client may run on its own files: the built-in reads.
LocalTool = Literal["read_file", "list_files", "search_code"]
"""A run or session id a client chose."""
InputText = Annotated[
    str,
    Field(min_length=1, max_length=MAX_INPUT_CHARS),
    # After the constraints in this list, so it runs before them (pydantic wraps them).
    BeforeValidator(task_text),
    AfterValidator(storable),
]
"""The task a run is given: some text, not only spaces."""


class FieldProblem(BaseModel):
    """What is wrong with one part of the request, shaped like FastAPI's own 422s."""

    loc: list[str | int] = Field(
        description="Where: `body`, `query`, `path` or `header`, then the field."
    )
    msg: str
    type: str


class Problem(BaseModel):
    """The body of every error answer."""

    detail: str | list[FieldProblem] = Field(description="What went wrong and what to do next.")


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
    model: StoredText | None = Field(
        default=None, max_length=200, description="Overrides the model."
    )
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
        description="A ceiling on the tokens of the run and its sub-agents (it replaces the "
        "agent's). A review that reaches it ends `completed` with `coverage: partial`.",
    )
    route_only: bool = Field(
        default=False,
        description='With `agent: "auto"`: decide which agent fits and report it, run none.',
    )


class UsagePublic(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost_usd: float = Field(default=0.0, description="From the price table in settings.")
    runs: int = Field(default=1, description="How many runs these figures add up.")


def tree_usage_public(tree: TreeUsage | None) -> UsagePublic | None:
    """A tree's usage as clients see it; None when it is unknown."""
    if tree is None:
        return None
    return UsagePublic(
        prompt_tokens=tree.prompt_tokens,
        completion_tokens=tree.completion_tokens,
        total_tokens=tree.total_tokens,
        cost_usd=tree.cost_usd,
        runs=tree.runs,
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


def usage_of(run: RunRecord) -> UsagePublic:
    return UsagePublic(
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
        total_tokens=run.prompt_tokens + run.completion_tokens,
        cost_usd=float(run.cost_usd),
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
    def from_record(cls, event: EventRecord, tenant_id: str) -> EventPublic:
        """The event as the run's tenant knows it: the ids in its data without their scope."""
        data = in_view_data(tenant_id, event.data)
        return cls(seq=event.seq, type=event.type, data=data, created_at=event.created_at)


class EventPage(BaseModel):
    events: list[EventPublic]
    next_after: int = Field(description="Pass as `after` to get the events that follow.")


class AgentPublic(BaseModel):
    name: str
    description: str
    tools: list[str]
    model: str | None
    mcp_servers: list[str] = Field(
        default_factory=list, description="Names of the MCP servers whose tools it uses."
    )
    read_only: bool = Field(
        default=False,
        description="Whether every tool it has only reads (no writes, commands, questions, "
        "sub-agents or MCP tools); the console's forms start with such an agent selected.",
    )

    @classmethod
    def from_spec(cls, agent: AgentSpec) -> AgentPublic:
        return cls(
            name=agent.name,
            description=agent.description,
            tools=agent.tools,
            model=agent.model,
            mcp_servers=[server.name for server in agent.mcp_servers],
            # The router has no tools of its own, but the agent it picks may act.
            read_only=agent.name != ROUTER_AGENT
            and not agent.mcp_servers
            and all(tool in TOOL_SPECS and TOOL_SPECS[tool].read_only for tool in agent.tools),
        )


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    temporal: str
    database: Literal["ok", "unavailable"]


class Liveness(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    """Whether this API can serve: both of its dependencies answer."""

    status: Literal["ready", "unready"]
    temporal: Literal["ok", "unreachable", "misconfigured"]
    """`misconfigured`: Temporal answers, but the namespace or Keel's search attributes are
    missing (`problems` says which, and what to run)."""
    database: Literal["ok", "unreachable"]
    problems: list[str] | None = None


class InteractionDecisionCreate(BaseModel):
    """A person's decision on a pending interaction."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "approve_always", "reject", "answer"]
    payload_hash: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="The `payload_hash` shown with the proposal; required to approve.",
    )
    text: StoredText | None = Field(
        default=None,
        max_length=MAX_LOCAL_RESULT_CHARS,
        description=(
            "Answer or reason (at most 20 000 characters), or the output of a "
            "client-executed tool call."
        ),
    )
    arguments: dict[str, object] | None = Field(
        default=None,
        description=(
            "Edited arguments to approve instead of the proposed ones (with `approve` and "
            "the proposal's `payload_hash`). They pass the same checks as the model's call; "
            "the edited call is what runs."
        ),
    )


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
    approved_arguments: dict[str, object] | None = Field(
        default=None, description="The arguments the approver edited in; None: as proposed."
    )
    approved_hash: str | None = Field(
        default=None, description="SHA-256 of the edited payload, which is what ran."
    )

    @classmethod
    def from_interaction(cls, run_id: str, ia: Interaction, *, tenant_id: str) -> InteractionPublic:
        """The interaction as the run's tenant knows it (ids without their scope)."""
        return cls(
            id=in_view(tenant_id, ia.id),
            run_id=in_view(tenant_id, run_id),
            kind=ia.kind,
            status=ia.status,
            tool=ia.tool,
            subject=ia.subject,
            arguments=json.loads(ia.arguments),
            payload_hash=ia.payload_hash,
            risk=ia.risk,
            question=ia.question,
            requester=ia.requester,
            approvers=ia.approvers,
            created_at=ia.created_at,
            expires_at=ia.expires_at,
            decision=ia.decision,
            decided_by=ia.decided_by,
            decided_at=ia.decided_at,
            answer=ia.answer,
            approved_arguments=None
            if ia.approved_arguments is None
            else json.loads(ia.approved_arguments),
            approved_hash=ia.approved_hash,
        )


class DecisionResult(BaseModel):
    """The decision took (`accepted`), or waits with Temporal for a worker (`queued`)."""

    status: Literal["accepted", "queued"] = Field(
        description="`accepted`: the run took it (a repeat of a decision that took says so "
        "too). `queued`: no worker answered, so Temporal keeps it for the run, which applies "
        "it with the same checks when a worker is back; read the interaction to see it land."
    )
    interaction: InteractionPublic


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


class TenantUsage(BaseModel):
    """What one tenant has used."""

    tenant_id: str
    runs: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


# -- schedules ------------------------------------------------------------------

OverlapPolicy = Literal["skip", "buffer_one", "cancel_other", "allow_all"]
"""What a schedule does when it fires while its last run still runs."""
BackfillOverlap = Literal["skip", "buffer_one", "buffer_all", "cancel_other", "allow_all"]
"""Overlap for one trigger or backfill; `buffer_all` runs them one after another."""
SCHEDULE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class ScheduleCreate(BaseModel):
    """A schedule that starts runs of an agent, on cron expressions or an interval."""

    model_config = ConfigDict(extra="forbid")

    schedule_id: str | None = Field(
        default=None,
        pattern=SCHEDULE_ID_PATTERN,
        description="Choose the id; by default `sch-` and 12 hex digits.",
    )
    agent: StoredText = Field(min_length=1, max_length=64, description="Agent definition name.")
    input: InputText = Field(description="The task each run is given.")
    workspace: StoredText = Field(
        min_length=1, max_length=4096, description="Directory the runs work on (inside the root)."
    )
    model: StoredText | None = Field(
        default=None, max_length=200, description="Overrides the agent's model."
    )
    cron_expressions: list[CronText] = Field(
        default_factory=list,
        max_length=20,
        description="Five-field cron expressions in `time_zone`; give these or `interval_s`.",
    )
    interval_s: int | None = Field(
        default=None, ge=1, le=366 * 86_400, description="Fire every this many seconds."
    )
    interval_offset_s: int = Field(
        default=0, ge=0, le=366 * 86_400, description="Shift interval fire times by this much."
    )
    time_zone: TimeZoneName = Field(default="UTC", description="IANA zone of the cron times.")
    jitter_s: int = Field(
        default=0, ge=0, le=86_400, description="Delay each fire by a random 0..jitter_s seconds."
    )
    overlap: OverlapPolicy = Field(
        default="skip", description="What to do when it fires while its last run still runs."
    )
    catchup_window_s: int = Field(
        default=3600,
        ge=10,
        le=366 * 86_400,
        description="After an outage, fire times missed by up to this much still run.",
    )
    paused: bool = Field(default=False, description="Create it paused.")
    note: StoredText | None = Field(
        default=None, max_length=1000, description="Why it is paused, or anything else."
    )
    approver: StoredText | None = Field(
        default=None,
        pattern=r"^user:[^\s]{1,200}$",
        description="Who decides its runs' approval requests (`user:ID`), with the creator.",
    )
    approval_expires_after_s: int | None = Field(
        default=None, ge=1, le=90 * 86_400, description="How long approval requests wait."
    )
    webhook_url: WebhookUrl | None = Field(
        default=None,
        description="Receives a signed POST when a run waits for approval and when it ends.",
    )


class ScheduleUpdate(BaseModel):
    """Change a schedule: only the fields given change; `null` clears an optional one.

    Giving `cron_expressions` drops the interval and giving `interval_s` drops the
    cron expressions. Runs already started keep what they started with.
    """

    model_config = ConfigDict(extra="forbid")

    agent: StoredText | None = Field(default=None, min_length=1, max_length=64)
    input: InputText | None = None
    workspace: StoredText | None = Field(default=None, min_length=1, max_length=4096)
    model: StoredText | None = Field(default=None, max_length=200)
    cron_expressions: list[CronText] | None = Field(default=None, max_length=20)
    interval_s: int | None = Field(default=None, ge=1, le=366 * 86_400)
    interval_offset_s: int | None = Field(default=None, ge=0, le=366 * 86_400)
    time_zone: TimeZoneName | None = None
    jitter_s: int | None = Field(default=None, ge=0, le=86_400)
    overlap: OverlapPolicy | None = None
    catchup_window_s: int | None = Field(default=None, ge=10, le=366 * 86_400)
    approver: StoredText | None = Field(default=None, pattern=r"^user:[^\s]{1,200}$")
    approval_expires_after_s: int | None = Field(default=None, ge=1, le=90 * 86_400)
    webhook_url: WebhookUrl | None = None


class ScheduledRunPublic(BaseModel):
    """A run a schedule started."""

    run_id: str
    scheduled_at: datetime = Field(description="The fire time it was started for (with jitter).")
    started_at: datetime


class SchedulePublic(BaseModel):
    """A schedule as clients see it: what it starts, when, and what it started."""

    id: str
    agent: str
    input: str
    workspace: str
    model: str
    cron_expressions: list[str]
    interval_s: int | None
    interval_offset_s: int
    time_zone: str
    jitter_s: int
    overlap: OverlapPolicy
    catchup_window_s: int
    paused: bool
    note: str | None
    approver: str | None
    approval_expires_after_s: int | None
    webhook_url: str | None
    created_by: str
    created_at: datetime
    updated_at: datetime | None
    next_fire_times: list[datetime] = Field(description="Next fire times, as Temporal has them.")
    recent_runs: list[ScheduledRunPublic] = Field(description="Latest runs started, oldest first.")
    running_runs: list[str] = Field(description="Runs it started that are still going.")
    runs_started: int
    skipped_overlap: int = Field(description="Fire times skipped because a run was still going.")
    missed_catchup_window: int = Field(description="Fire times missed by more than the window.")


class ScheduleList(BaseModel):
    schedules: list[SchedulePublic]
    next_cursor: str | None = Field(description="Pass as `after` for the next page.")


class ScheduleNoteCreate(BaseModel):
    """Pause or unpause a schedule, saying why."""

    model_config = ConfigDict(extra="forbid")

    note: StoredText | None = Field(default=None, max_length=1000)


class ScheduleTriggerCreate(BaseModel):
    """Start a run now."""

    model_config = ConfigDict(extra="forbid")

    overlap: BackfillOverlap | None = Field(
        default=None, description="Overrides the schedule's overlap policy for this run."
    )


class ScheduleTriggered(BaseModel):
    schedule_id: str
    run_id: str | None = Field(description="The run it started, once Temporal has started it.")
    skipped: bool = Field(description="True when the overlap policy skipped it.")


class ScheduleBackfillCreate(BaseModel):
    """Start the runs the schedule would have started between two times (both included)."""

    model_config = ConfigDict(extra="forbid")

    start: AwareDatetime
    end: AwareDatetime
    overlap: BackfillOverlap = Field(
        default="buffer_all", description="`buffer_all` runs them one after another."
    )


class ScheduleBackfillAccepted(BaseModel):
    schedule_id: str
    fire_times: int = Field(description="How many runs the backfill starts.")
    first: datetime | None
    last: datetime | None


class WebhookSecretPublic(BaseModel):
    """The secret this tenant's webhook receivers verify signatures with."""

    tenant_id: str
    secret: str
    signature_header: str = Field(description="`t=<unix seconds>,v1=<hex HMAC-SHA256>`.")


class CodecPayload(BaseModel):
    """One Temporal payload in protobuf's JSON form: base64 bytes, empty ones left out."""

    metadata: dict[str, str] = Field(
        default_factory=dict, description="Metadata values, each base64 (`encoding`, ...)."
    )
    data: str = Field(default="", description="The payload's bytes, base64.")


class CodecPayloads(BaseModel):
    """What the Temporal Web UI and `temporal --codec-endpoint` send and receive."""

    payloads: list[CodecPayload] = Field(default_factory=list)


class RetentionPolicyUpdate(BaseModel):
    """How long a tenant's finished runs keep their contents."""

    model_config = ConfigDict(extra="forbid")

    days: int = Field(ge=1, le=36_500, description="Days after a run finishes.")


class RetentionSweepStarted(BaseModel):
    """A sweep was asked of the retention schedule; it runs on a worker."""

    schedule_id: str


class EvalResultCreate(BaseModel):
    """Record what one `keel eval` found (its results file), under an id it chose."""

    model_config = ConfigDict(extra="forbid")

    id: ChosenId = Field(description="Sending the same id and report again records nothing new.")
    report: EvalReport


class EvalResultSummary(BaseModel):
    """An eval result as the list shows it."""

    id: str
    requester: str
    recorded_at: datetime
    started_at: datetime
    finished_at: datetime
    repeat: int = Field(description="Runs per scenario.")
    scenarios: int
    passed: int = Field(description="Scenarios whose pass rate reached the eval's minimum.")


class EvalResultPublic(EvalResultSummary):
    """An eval result with every scenario and attempt."""

    report: EvalReport


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
