"""The run's payloads: its input, state, progress and result, and its records.

Fields added later get defaults so recorded histories keep replaying.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from keel.workflows import timeouts
from keel.workflows.gate.grants import LiveGrant
from keel.workflows.gate.models import GateResult, MessageRef
from keel.workflows.gate.permissions import PermissionRule
from keel.workflows.interactions.models import Interaction
from keel.workflows.router.models import RouteRequest
from keel.workflows.run.agent_spec import AgentSpec
from keel.workflows.run.coverage_plan import CoverageState, CoverageSummary
from keel.workflows.run.subagent_models import ChildRun, SubagentTask
from keel.workflows.usage.models import Usage

Trigger = Literal["api", "cli", "a2a", "schedule", "parent"]


RunStatus = Literal["queued", "running", "completed", "failed", "cancelled"]


StopReason = Literal[
    "final_answer",
    "max_steps",
    "max_tool_calls",
    "max_consecutive_failures",
    "budget",
    "token_budget",
    "no_progress",
    "approval_expired",
    "error",
    "cancelled",
]


class RunState(BaseModel):
    """What the loop carries between steps, and across continue-as-new."""

    step: int = 0
    next_seq: int = 1
    tool_calls: int = 0
    consecutive_failures: int = 0
    stale_rounds: int = 0
    nudged: bool = False
    usage: Usage = Field(default_factory=Usage)
    answered: dict[str, MessageRef] = Field(
        default_factory=dict, description="Call fingerprint -> where its answer is stored."
    )
    pending_results: list[GateResult] = Field(
        default_factory=list, description="Gate answers to store with the next LLM call."
    )
    session_rules: list[PermissionRule] = Field(
        default_factory=list, description="Rules added by `approve_always` in this session."
    )
    interactions: dict[str, Interaction] = Field(
        default_factory=dict, description="Every interaction of the run, by id."
    )
    grants: list[LiveGrant] = Field(
        default_factory=list, description="Grants the gate applies after the session's rules."
    )
    revoked_grants: list[str] = Field(
        default_factory=list, description="Ids of grants revoked while the run ran."
    )
    webhooks_sent: int = Field(default=0, description="Notices handed to the run's webhook.")
    last_llm_ms: int | None = Field(
        default=None, description="How long the latest model call took; None before the first."
    )
    local_llm_ms: int = Field(
        default=0, description="Model time spent in local activities since the last checkpoint."
    )
    mcp_tools: list[str] = Field(
        default_factory=list,
        description="Model-visible names of the MCP tools discovered at the run's start.",
    )
    mcp_unavailable: list[str] = Field(
        default_factory=list,
        description="MCP servers that could not be reached at the run's start.",
    )
    compactions: int = Field(
        default=0, description="Compactions so far; their summaries are in Postgres."
    )
    children: dict[str, ChildRun] = Field(
        default_factory=dict, description="Sub-agent runs started by `task` calls, by run id."
    )
    subagent_tool_calls: int = Field(
        default=0, description="Tool calls the run's finished sub-agents made, for its limits."
    )
    coverage: CoverageState | None = Field(
        default=None, description="Set for a run whose agent asks Keel to cover its files."
    )
    last_call: Usage = Field(
        default_factory=Usage,
        description="The tokens and cost of the run's latest model call, for a ceiling's "
        "estimate of the next (`budget.reached`).",
    )
    call_growth: Usage = Field(
        default_factory=Usage,
        description="How much the latest model call grew over the one before it.",
    )


class RunInput(BaseModel):
    """Input of `AgentRunWorkflow`; the workflow id is the run id."""

    run_id: str = Field(
        default="",
        description="Empty: the workflow id, which a schedule picks when it fires.",
    )
    agent: AgentSpec
    input: str = Field(default="", description="Empty when `texts_key` holds it.")
    model: str = Field(default="", description="Empty for a sub-agent until it opens.")
    workspace: str = Field(default="", description="Empty for a sub-agent until it opens.")
    tenant_id: str = "default"
    requester: str = "anonymous"
    trigger: Trigger = "api"
    session_id: str | None = None
    parent_run_id: str | None = None
    llm_max_attempts: int = Field(default=6, ge=1, description="Attempts per LLM call.")
    approver: str | None = Field(default=None, description="Overrides the agent's approver.")
    approval_expires_after_s: int | None = Field(
        default=None, ge=1, description="Overrides the agent's approval expiry."
    )
    session_rules: list[PermissionRule] = Field(
        default_factory=list, description="Rules the session already granted."
    )
    grants: list[LiveGrant] = Field(
        default_factory=list, description="Live grants that cover the run when it starts."
    )
    state: RunState | None = Field(default=None, description="Set when continuing as new.")
    local_tools: list[str] = Field(
        default_factory=list,
        description="Read tools the client that started the run executes (`local_tool_result`).",
    )
    schedule_id: str | None = Field(default=None, description="The schedule that started it.")
    webhook_url: str | None = Field(
        default=None, description="Told when the run waits for approval and when it finishes."
    )
    push_notifications: bool = Field(
        default=False,
        description="An A2A task: also tell the push notification configs its clients set.",
    )
    texts_key: str | None = Field(
        default=None,
        max_length=64,
        description="Key of the stored system prompt and input; both then travel empty.",
    )
    fast_model: bool = Field(
        default=False,
        description="The model's latest calls were all fast: the first call runs local too.",
    )
    llm_local_below_ms: int = Field(
        default=timeouts.LLM_LOCAL_BELOW_MS,
        ge=0,
        description="A model call this fast has the next one run as a local activity.",
    )
    llm_local_budget_ms: int = Field(
        default=timeouts.LLM_LOCAL_BUDGET_MS,
        ge=0,
        description="Model time local calls may take before a regular one checkpoints the run.",
    )
    depth: int = Field(
        default=0, ge=0, description="0 for a run people started; a sub-agent's parent's + 1."
    )
    max_parallel_subagents: int = Field(
        default=4, ge=1, le=64, description="`task` calls of one step that run at once."
    )
    task: SubagentTask | None = Field(
        default=None, description="Set for a sub-agent: the parent's call that started it."
    )
    route: RouteRequest | None = Field(
        default=None, description='Set for `agent: "auto"`: the router picks the agent.'
    )
    fallback_models: list[str] = Field(
        default_factory=list,
        description="Models that take a step, in order, when the one before fails it "
        "(`workflows.run.model_fallback`); `model` is tried first.",
    )
    provider_limits: bool = Field(
        default=False,
        description="This Keel limits calls to a provider: each model call gets an event "
        "number for its wait (`rate_limited`).",
    )
    acting_roles: list[str] | None = Field(
        default=None,
        description="Set for a schedule's runs: the creator's roles, checked against the "
        "agent's `roles:` as the run starts (the schedule fires without the API).",
    )


class RunResult(BaseModel):
    """Output of `AgentRunWorkflow`."""

    run_id: str
    status: RunStatus
    stop_reason: StopReason
    steps: int
    tool_calls: int
    usage: Usage
    report_preview: str = ""
    error: str | None = None
    coverage: CoverageSummary | None = Field(
        default=None, description="What Keel's ledger says was read, for a covering run."
    )


class RunProgress(BaseModel):
    """Answer of the `progress` query."""

    status: RunStatus
    step: int
    tool_calls: int
    usage: Usage
    stop_reason: StopReason | None = None
    pending_interactions: list[str] = Field(default_factory=list)


class StartRunInput(BaseModel):
    """Input of `start_run`: record the run and its opening messages."""

    run_id: str
    agent: str
    system_prompt: str
    input: str
    model: str
    workspace: str
    tenant_id: str
    requester: str
    trigger: Trigger
    session_id: str | None
    parent_run_id: str | None
    event_seq: int
    schedule_id: str | None = None
    texts_key: str | None = Field(
        default=None, description="Key of the stored system prompt and input, if they are."
    )


class FinishRunInput(BaseModel):
    """Input of `finish_run`: record the outcome and the terminal event."""

    run_id: str
    status: RunStatus
    stop_reason: StopReason
    error: str | None = None
    final_step: int | None = Field(default=None, description="Step whose message is the report.")
    steps: int
    tool_calls: int
    usage: Usage
    event_seq: int
    preview: bool = Field(
        default=True,
        description="Answer with the report's first characters; a run asks only for its "
        "webhook notice, so report text stays out of the history.",
    )


class FinishRunResult(BaseModel):
    """Output of `finish_run`."""

    report_preview: str = ""
