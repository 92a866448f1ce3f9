"""Payloads that cross the workflow boundary.

One model in and one model out per workflow, activity and query. Fields added
later get defaults so recorded histories keep replaying.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from keel.workflows.gate.permissions import PermissionRule
from keel.workflows.gate.plugin_refs import HookRef, PluginToolRef
from keel.workflows.gate.tool_specs import Risk
from keel.workflows.router.models import RouteRequest
from keel.workflows.run.coverage_plan import CoverageState, CoverageSummary

Trigger = Literal["api", "cli", "a2a", "schedule", "parent"]
RunStatus = Literal["queued", "running", "completed", "failed", "cancelled"]
StopReason = Literal[
    "final_answer",
    "max_steps",
    "max_tool_calls",
    "max_consecutive_failures",
    "token_budget",
    "no_progress",
    "approval_expired",
    "error",
    "cancelled",
]


class Limits(BaseModel):
    """Hard and medium convergence limits of a run."""

    model_config = ConfigDict(extra="forbid")

    max_steps: int = Field(
        default=30, ge=1, le=10_000, description="LLM calls before a forced answer."
    )
    max_tool_calls: int = Field(default=120, ge=0, le=100_000, description="Tool calls in all.")
    max_consecutive_failures: int = Field(
        default=5, ge=1, le=1000, description="Failed tool calls in a row before a forced answer."
    )
    max_stale_rounds: int = Field(
        default=3,
        ge=1,
        le=1000,
        description="Tool rounds with nothing new before the run is nudged.",
    )
    max_total_tokens: int | None = Field(
        default=None, ge=1, description="Prompt plus completion tokens before a forced answer."
    )
    max_parallel_subagents: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="`task` calls of one step that run at once; None: the worker's setting.",
    )


class ApprovalPolicy(BaseModel):
    """How a run asks for and waits on approvals."""

    expires_after_s: int = Field(
        default=86_400, ge=1, le=90 * 86_400, description="How long a request waits."
    )
    on_expiry: Literal["tell_model", "fail"] = Field(
        default="tell_model", description="Tell the model the call did not run, or fail the run."
    )
    approver: str | None = Field(
        default=None,
        pattern=r"^user:[^\s]{1,200}$",
        description="Who else may decide (`user:ID`), besides the requester.",
    )
    no_self_approval: list[Risk] = Field(
        default_factory=list,
        description="Risks whose calls the requester may not approve themselves.",
    )


# Short, lower-case, no `__` and no trailing separator: `mcp__<server>__<tool>` then
# splits at its first `__` after the prefix, and stays within 64 characters.
MCP_SERVER_NAME = r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$"
MCP_SERVER_NAME_MAX = 20


class McpServerSpec(BaseModel):
    """An external MCP server whose tools an agent uses, over streamable HTTP."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        pattern=MCP_SERVER_NAME,
        max_length=MCP_SERVER_NAME_MAX,
        description="Short identifier: tools are offered as `mcp__<name>__<tool>`.",
    )
    url: str = Field(max_length=2000, description="The server's streamable HTTP endpoint.")
    tools: list[str] | None = Field(
        default=None, description="The server's tools the agent may use; None: all it lists."
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        scheme, sep, rest = url.partition("://")
        if not sep or scheme.lower() not in ("http", "https") or not rest.strip("/"):
            raise ValueError("an MCP server URL must be an http:// or https:// URL")
        if any(c.isspace() for c in url):
            raise ValueError("an MCP server URL may not contain whitespace")
        authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
        if "@" in authority:
            raise ValueError(
                "an MCP server URL may not carry credentials; put its token in KEEL_MCP_TOKENS"
            )
        return url


class AgentSpec(BaseModel):
    """An agent definition as the workflow sees it (loaded from a Markdown file)."""

    name: str
    description: str = ""
    system_prompt: str = Field(default="", description="Empty when the run's texts hold it.")
    model: str | None = Field(default=None, description="Overrides the default model.")
    tools: list[str] = Field(default_factory=list, description="Tool allowlist.")
    limits: Limits = Field(default_factory=Limits)
    permissions: list[PermissionRule] = Field(
        default_factory=list, description="Agent rules, applied after the defaults."
    )
    approval: ApprovalPolicy = Field(default_factory=ApprovalPolicy)
    mcp_servers: list[McpServerSpec] = Field(
        default_factory=list, description="External MCP servers whose tools the agent uses."
    )
    context_window: int | None = Field(
        default=None, description="The model's context window in tokens, if the file says."
    )
    subagents: list[str] = Field(
        default_factory=list,
        description="Agents this one may run through the `task` tool; none: no `task` tool.",
    )
    memory: bool = Field(
        default=False,
        description="Recall the user's memories before the first call, store new facts after.",
    )
    plugin_tools: list[PluginToolRef] = Field(
        default_factory=list, description="The plugin tools of `tools`, as the gate judges them."
    )
    hooks: list[HookRef] = Field(
        default_factory=list, description="The installed plugins' hooks, in the order they run."
    )
    client_tools: list[str] = Field(
        default_factory=list,
        description="Read tools every run of this agent asks its client to execute.",
    )
    roles: list[str] = Field(
        default_factory=list,
        description="Roles whose callers the router may send to this agent; empty: everyone.",
    )
    coverage: Literal["model", "files"] = Field(
        default="model",
        description="`files`: Keel plans the reading of every file and checks it from its "
        "records; `model`: what is read is left to the model.",
    )


class Usage(BaseModel):
    """Token usage of one or more LLM calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def plus(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class TreeUsage(BaseModel):
    """Tokens and cost of a run and every sub-agent run below it: the sum of the model
    calls recorded for the tree (each run's own `prompt_tokens`, `completion_tokens`
    and `cost_usd`), summed by one query (`activities/store/run_tree.py`)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0
    runs: int = Field(default=1, description="How many runs the tree holds, the run included.")


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


ChildStatus = Literal["running", "waiting", "completed", "failed", "cancelled"]


class ChildRun(BaseModel):
    """A sub-agent run as its parent keeps it: enough for limits, progress and the tree."""

    run_id: str
    agent: str
    step: int
    ord: int
    status: ChildStatus = "running"
    pending: list[str] = Field(
        default_factory=list, description="Interactions the child waits on now."
    )
    tool_calls: int = 0
    usage: Usage = Field(default_factory=Usage)


class MessageRef(BaseModel):
    """Natural key of a stored message."""

    step: int
    ord: int


class GateResult(BaseModel):
    """A tool answer produced by the gate rather than by running a tool."""

    step: int
    ord: int
    call_id: str
    name: str
    content: str | None = Field(default=None, description="Text given to the model.")
    copy_of: MessageRef | None = Field(default=None, description="Repeat this stored answer.")
    arguments: str = ""
    is_error: bool = True
    event_seq: int
    denied_by: str | None = Field(default=None, description="The rule that denied it, if any.")
    child_run_id: str | None = Field(
        default=None, description="A `task` call's answer: the report of this sub-agent run."
    )


InteractionKind = Literal["confirm", "ask_user", "local_tool_result"]
# What the client that runs a `local_tool_result` call may post back, and an answer's cap.
MAX_LOCAL_RESULT_CHARS = 262_144
MAX_ANSWER_CHARS = 20_000
InteractionStatus = Literal[
    "pending",
    "approved",
    "rejected",
    "expired",
    "answered",
    "executing",
    "executed",
    "failed",
    "cancelled",  # the run ended before anyone decided it (activities/store/interaction_closing)
]
DecisionKind = Literal["approve", "approve_always", "reject", "answer"]


class Interaction(BaseModel):
    """Something the run waits on from outside: a proposal to confirm, a question, or a
    tool call the client that started the run executes and answers with its output."""

    id: str
    kind: InteractionKind
    step: int
    ord: int
    call_id: str
    tool: str
    arguments: str = Field(description="Canonical JSON of the arguments that will run.")
    payload_hash: str = Field(description="SHA-256 of the canonical proposal.")
    risk: Risk
    subject: str
    question: str | None = None
    status: InteractionStatus = "pending"
    requester: str
    approvers: list[str] = Field(description="Who may decide.")
    created_at: datetime
    expires_at: datetime
    decision: DecisionKind | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    answer: str | None = None
    decision_id: str | None = Field(
        default=None, description="Which decision request took, so every record names one."
    )


class InteractionDecision(BaseModel):
    """Payload of the `resolve_interaction` signal and the `decide` update."""

    interaction_id: str = Field(max_length=200)
    decision: DecisionKind
    approver: str = Field(min_length=1, max_length=256, description="`user:ID` of the decider.")
    payload_hash: str | None = Field(
        default=None, max_length=64, description="The hash the approver saw; required to approve."
    )
    text: str | None = Field(
        default=None,
        max_length=MAX_LOCAL_RESULT_CHARS,
        description="Answer or reason; a client-executed tool's output (its own cap is larger).",
    )
    decision_id: str | None = Field(
        default=None,
        max_length=64,
        description="Names this request; the run makes one up when it is missing.",
    )


class DecisionOutcome(BaseModel):
    """Result of the `decide` update."""

    interaction_id: str
    status: InteractionStatus
    decision_id: str | None = None


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


class ToolCallRequest(BaseModel):
    """A tool call the model asked for, as it asked (arguments are raw JSON)."""

    call_id: str
    name: str
    arguments: str


class LlmStepInput(BaseModel):
    """Input of `llm_step`: one chat completion over the stored conversation."""

    run_id: str
    tenant_id: str = "default"
    session_id: str | None = None
    step: int
    model: str
    tools: list[str]
    tool_choice: Literal["auto", "none"] = "auto"
    nudge: str | None = Field(default=None, description="A user message to add before calling.")
    gate_results: list[GateResult] = Field(default_factory=list)
    event_seq: int
    start: StartRunInput | None = Field(
        default=None, description="Open the run's record first (a run's first call, when local)."
    )
    mcp: bool = Field(
        default=False,
        description="Also offer the run's discovered MCP tools, whose definitions are stored.",
    )
    context_window: int | None = Field(
        default=None, description="The agent file's context window for the model, if any."
    )
    plugin_tools: list[str] = Field(
        default_factory=list, description="Plugin tools to offer, described by the worker."
    )


class CompactionNeed(BaseModel):
    """`llm_step` did not call the model: the conversation must be compacted first."""

    level: int = Field(description="0: summarise all but the newest step; higher: harder.")
    estimate: int = Field(description="Estimated tokens of the request that did not fit.")
    window: int = Field(description="The context window it was measured against.")
    refused: bool = Field(default=False, description="The provider refused it as too long.")


class CompactionInput(BaseModel):
    """Input of `compact_context`: summarise a run's conversation before `step`."""

    run_id: str
    session_id: str | None = None
    step: int
    model: str
    tools: list[str] = Field(default_factory=list, description="Offered to the next call.")
    need: CompactionNeed
    event_seq: int
    context_window: int | None = None


class CompactionResult(BaseModel):
    """Output of `compact_context`: the figures; the summary itself is in Postgres."""

    through_step: int
    tokens_before: int
    tokens_after: int
    tokens: list[int] = Field(default_factory=list, description="[prompt, completion] spent.")


class LlmStepResult(BaseModel):
    """Output of `llm_step`: a digest; the message itself is in Postgres."""

    tool_calls: list[ToolCallRequest] = Field(default_factory=list)
    latency_ms: int = Field(default=0, description="How long the model took to answer.")
    tokens: list[int] = Field(
        default_factory=list,
        description="[prompt, completion]: a third of the bytes of a `Usage` in every step.",
    )
    compact: CompactionNeed | None = Field(
        default=None, description="The model was not called: compact, then call again."
    )

    def spent(self) -> Usage:
        """The tokens of the call."""
        if not self.tokens:
            return Usage()
        prompt, completion = self.tokens
        return Usage(prompt_tokens=prompt, completion_tokens=completion)


class ToolCallInput(BaseModel):
    """Input of `run_tool`: execute one validated call and store its output."""

    run_id: str
    step: int
    ord: int
    call_id: str
    name: str
    arguments: str
    workspace: str
    event_seq: int
    interaction_id: str | None = Field(default=None, description="The approval it executes.")
    tenant_id: str = "default"
    allowed_by: str | None = Field(
        default=None, description="The rule that allowed an acting call without asking."
    )
    network: bool = Field(
        default=False, description="A `network` rule lets this command reach the network."
    )
    hold_output: bool = Field(
        default=False,
        description="Keep the output aside for `tool.after` hooks instead of answering with it.",
    )


class ToolDigest(BaseModel):
    """Output of `run_tool`: what the workflow needs, not the output itself.

    Whether the output is an error, and whether it repeats an earlier step's output
    (convergence); the output, its size and its hash are in Postgres.
    """

    is_error: bool = False
    stale: bool = Field(
        default=False, description="The output repeats one of an earlier step of the run."
    )


class McpDiscoveryInput(BaseModel):
    """Input of `discover_mcp_tools`: list the servers' tools and store their definitions."""

    run_id: str
    servers: list[McpServerSpec]


class McpDiscoveryResult(BaseModel):
    """Output of `discover_mcp_tools`: names only; the definitions are in Postgres."""

    tools: list[str] = Field(default_factory=list, description="Model-visible tool names.")
    unavailable: list[str] = Field(
        default_factory=list, description="Servers that could not be reached."
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


class OpenInteractionsInput(BaseModel):
    """Input of `open_interactions`: persist new requests, emit and audit them."""

    run_id: str
    tenant_id: str
    session_id: str | None = None
    interactions: list[Interaction]
    event_seq: int = Field(description="First of one seq per interaction.")


class ResolveInteractionInput(BaseModel):
    """Input of `resolve_interaction`: persist a decision or an expiry, emit and audit it."""

    run_id: str
    tenant_id: str
    session_id: str | None = None
    interaction: Interaction
    new_session_rule: PermissionRule | None = None
    event_seq: int


class SubagentTask(BaseModel):
    """What a sub-agent run knows of the `task` call that started it.

    The prompt is not here: the child reads it from its parent's stored message, so
    it travels in neither history.
    """

    step: int = Field(description="The parent's step that made the call.")
    ord: int = Field(description="The call's ordinal in that step.")
    event_seq: int = Field(description="Parent's seqs for the `tool_call` and `child_run` events.")
    max_tool_calls: int = Field(ge=1, description="The child's share of the parent's tool calls.")
    max_total_tokens: int | None = Field(
        default=None, ge=1, description="The child's share of the parent's token budget."
    )
    routed: bool = Field(
        default=False,
        description="Handed the user's own request by the router (not a prompt its parent "
        "wrote): it recalls and remembers for the user like a run the user started.",
    )
    part: str | None = Field(
        default=None,
        description="Set for a part of its parent's coverage plan (`round-index`): Keel "
        "wrote its prompt from `files`, no model call started it.",
    )
    files: list[str] = Field(default_factory=list, description="A part's files to read.")
    max_steps: int | None = Field(
        default=None, ge=1, description="A part's steps: as many as its pages need."
    )


class OpenSubagentInput(BaseModel):
    """Input of `open_subagent`: a sub-agent run finds its agent and its prompt."""

    run_id: str
    parent_run_id: str
    tenant_id: str
    requester: str
    agent: str
    task: SubagentTask


class SubagentPlan(BaseModel):
    """Output of `open_subagent`: the child's agent (prompt and input stored), model, place."""

    agent: AgentSpec
    model: str
    workspace: str = Field(description="The parent's workspace, which the child works in.")
    texts_key: str = Field(description="Key of the child's stored system prompt and input.")


class ChildRunNotice(BaseModel):
    """Signal `child_status`: a sub-agent tells its parent it waits on someone, or no more."""

    run_id: str
    status: ChildStatus
    pending: list[str] = Field(default_factory=list)


class ChildEventInput(BaseModel):
    """Input of `record_child_event`: one `child_run` event in the parent's stream."""

    run_id: str = Field(description="The parent's run id.")
    event_seq: int
    child: ChildRun


class ResolveInteractionResult(BaseModel):
    """Output of `resolve_interaction`: the outcome Postgres holds, which the run follows.

    The first decision (or expiry) stored wins; a later one gets the winner back."""

    interaction: Interaction


RunState.model_rebuild()
RunInput.model_rebuild()


class SessionSubmission(BaseModel):
    """A message posted to a session: the run it becomes, and what to do if busy."""

    run: RunInput
    on_busy: Literal["reject", "enqueue", "interrupt"] = "reject"


class SessionState(BaseModel):
    """Input and query answer of `SessionWorkflow`."""

    session_id: str = ""
    tenant_id: str = "default"
    queue: list[SessionSubmission] = Field(default_factory=list)
    active: str | None = None
    runs_done: int = 0


class SubmitOutcome(BaseModel):
    """Result of the session's `submit` update."""

    run_id: str
    position: int = Field(description="0: starting now; n: n runs ahead of it.")
    interrupted: str | None = Field(default=None, description="The run it cancelled, if any.")


class Withdrawal(BaseModel):
    """Input of the session's `withdraw` update: the run to cancel."""

    run_id: str


class WithdrawOutcome(BaseModel):
    """Result of the session's `withdraw` update."""

    run_id: str
    was: Literal["queued", "active", "unknown"]


class SessionRulesInput(BaseModel):
    """Input of `session_rules`."""

    session_id: str


class SessionRulesResult(BaseModel):
    """Output of `session_rules`: what `approve_always` granted in this session."""

    rules: list[PermissionRule] = Field(default_factory=list)


WebhookEvent = Literal["run.waiting", "run.finished"]


class WebhookInteraction(BaseModel):
    """An approval request or question, as a webhook receiver sees it (no arguments)."""

    id: str
    kind: InteractionKind
    tool: str
    subject: str
    risk: Risk
    payload_hash: str
    approvers: list[str]
    expires_at: datetime
    question: str | None = None


class WebhookNotice(BaseModel):
    """The JSON body POSTed to a run's webhook."""

    id: str = Field(description="Delivery id, the same on every retry: deduplicate on it.")
    event: WebhookEvent
    run_id: str
    tenant_id: str
    status: RunStatus | Literal["waiting"] = Field(
        description="`waiting` for `run.waiting`; else how the run ended."
    )
    agent: str
    requester: str
    schedule_id: str | None = None
    occurred_at: datetime
    stop_reason: StopReason | None = None
    error: str | None = None
    report_preview: str = ""
    steps: int = 0
    tool_calls: int = 0
    interactions: list[WebhookInteraction] = Field(
        default_factory=list, description="`run.waiting`: what the run waits on."
    )
    session_id: str | None = Field(
        default=None, description="The run's session (an A2A task's contextId)."
    )
    usage: TreeUsage | None = Field(
        default=None,
        description="Tokens and cost of the run and its sub-agent runs when the notice was "
        "sent, from their recorded model calls.",
    )


class WebhookDelivery(BaseModel):
    """Input of `WebhookDeliveryWorkflow` and `deliver_webhook`."""

    url: str
    notice: WebhookNotice
    push_config_id: str | None = Field(
        default=None,
        description="An A2A push config of the run's task: send the notice as an A2A task "
        "update, with the config's token (looked up at delivery, never in history).",
    )


class PushTargetsInput(BaseModel):
    """Input of `push_targets`."""

    run_id: str


class PushTarget(BaseModel):
    """One A2A push config a notice goes to: its id and URL (its token stays in Postgres)."""

    config_id: str
    url: str


class PushTargets(BaseModel):
    """Output of `push_targets`: the task's push configs now."""

    targets: list[PushTarget] = Field(default_factory=list)


class WebhookReceipt(BaseModel):
    """Output of `deliver_webhook`: the receiver took the notice."""

    status_code: int
    attempt: int


class HookCall(BaseModel):
    """One tool call the rules would run or ask about, as `tool.before` hooks see it."""

    ord: int
    call_id: str
    tool: str
    arguments: str = Field(description="The canonical JSON arguments.")
    subject: str
    risk: Risk
    verdict: Literal["run", "ask"] = Field(description="What the permission rules decided.")


class BeforeHooksInput(BaseModel):
    """Input of `tool_before_hooks`: one step's calls, judged by every applicable hook."""

    run_id: str
    tenant_id: str = "default"
    agent: str
    step: int
    hooks: list[HookRef]
    calls: list[HookCall]


HookAction = Literal["allow", "deny", "ask"]


class HookVerdict(BaseModel):
    """What the hooks made of one call: the first `deny` wins, else any `ask`."""

    ord: int
    action: HookAction = "allow"
    hook: str = Field(default="", description="`plugin/hook` that decided, if any did.")
    reason: str = ""


class BeforeHooksResult(BaseModel):
    """Output of `tool_before_hooks`, one verdict per call."""

    verdicts: list[HookVerdict] = Field(default_factory=list)


class AfterHooksInput(BaseModel):
    """Input of `tool_after_hooks`: the held output of one call, to annotate or redact."""

    call: ToolCallInput
    agent: str
    hooks: list[HookRef]
    subject: str = Field(default="", description="What permission patterns matched.")
    risk: Risk = "read"


class RunEndInput(BaseModel):
    """Input of `run_end_hooks`: the outcome of a finished run."""

    run_id: str
    tenant_id: str = "default"
    agent: str
    status: RunStatus
    stop_reason: StopReason
    error: str | None = None
    hooks: list[HookRef]
