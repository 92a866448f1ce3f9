"""Payloads that cross the workflow boundary.

One model in and one model out per workflow, activity and query. Fields added
later get defaults so recorded histories keep replaying.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Trigger = Literal["api", "cli", "a2a", "schedule", "parent"]
RunStatus = Literal["queued", "running", "completed", "failed", "cancelled"]
StopReason = Literal[
    "final_answer",
    "max_steps",
    "max_tool_calls",
    "max_consecutive_failures",
    "token_budget",
    "no_progress",
    "error",
    "cancelled",
]


class Limits(BaseModel):
    """Hard and medium convergence limits of a run."""

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


class AgentSpec(BaseModel):
    """An agent definition as the workflow sees it (loaded from a Markdown file)."""

    name: str
    description: str = ""
    system_prompt: str
    model: str | None = Field(default=None, description="Overrides the default model.")
    tools: list[str] = Field(default_factory=list, description="Tool allowlist.")
    limits: Limits = Field(default_factory=Limits)


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


class RunState(BaseModel):
    """What the loop carries between steps, and across continue-as-new."""

    step: int = 0
    next_seq: int = 1
    tool_calls: int = 0
    consecutive_failures: int = 0
    stale_rounds: int = 0
    nudged: bool = False
    usage: Usage = Field(default_factory=Usage)
    seen: list[str] = Field(default_factory=list, description="Paths and result hashes seen.")
    answered: dict[str, MessageRef] = Field(
        default_factory=dict, description="Call fingerprint -> where its answer is stored."
    )
    pending_results: list[GateResult] = Field(
        default_factory=list, description="Gate answers to store with the next LLM call."
    )


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
    event_seq: int


class RunInput(BaseModel):
    """Input of `AgentRunWorkflow`; the workflow id is the run id."""

    run_id: str
    agent: AgentSpec
    input: str
    model: str
    workspace: str
    tenant_id: str = "default"
    requester: str = "anonymous"
    trigger: Trigger = "api"
    session_id: str | None = None
    parent_run_id: str | None = None
    llm_max_attempts: int = Field(default=6, ge=1, description="Attempts per LLM call.")
    state: RunState | None = Field(default=None, description="Set when continuing as new.")


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


class RunProgress(BaseModel):
    """Answer of the `progress` query."""

    status: RunStatus
    step: int
    tool_calls: int
    usage: Usage
    stop_reason: StopReason | None = None


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


class ToolCallRequest(BaseModel):
    """A tool call the model asked for, as it asked (arguments are raw JSON)."""

    call_id: str
    name: str
    arguments: str


class LlmStepInput(BaseModel):
    """Input of `llm_step`: one chat completion over the stored conversation."""

    run_id: str
    session_id: str | None = None
    step: int
    model: str
    tools: list[str]
    tool_choice: Literal["auto", "none"] = "auto"
    nudge: str | None = Field(default=None, description="A user message to add before calling.")
    gate_results: list[GateResult] = Field(default_factory=list)
    event_seq: int


class LlmStepResult(BaseModel):
    """Output of `llm_step`: a digest; the message itself is in Postgres."""

    tool_calls: list[ToolCallRequest] = Field(default_factory=list)
    content_preview: str = ""
    content_chars: int = 0
    finish_reason: str = "stop"
    usage: Usage = Field(default_factory=Usage)


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


class ToolDigest(BaseModel):
    """Output of `run_tool`: what the workflow needs, not the output itself."""

    size: int
    sha256: str
    preview: str
    is_error: bool
    seen: list[str] = Field(default_factory=list)


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


class FinishRunResult(BaseModel):
    """Output of `finish_run`."""

    report_preview: str = ""


RunState.model_rebuild()
