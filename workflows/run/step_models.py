"""One step's payloads: the model call (`llm_step`) and a tool call (`run_tool`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from keel.workflows.context.models import CompactionNeed
from keel.workflows.gate.models import GateResult
from keel.workflows.run.models import StartRunInput
from keel.workflows.usage.models import Usage


class ToolCallRequest(BaseModel):
    """A tool call the model asked for, as it asked (arguments are raw JSON)."""

    call_id: str
    name: str
    arguments: str


class ModelMove(BaseModel):
    """Why a step's call went to this model: the one before it in the run's list failed."""

    from_model: str
    reason: Literal["overloaded", "unknown_model", "context_too_long"]
    detail: str = Field(default="", description="The last failure's sentence, cut short.")
    event_seq: int = Field(description="Where the `model_fallback` event is recorded.")


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
    wait_seq: int | None = Field(
        default=None,
        description="Where a wait for the provider's rate limit is recorded (`rate_limited`); "
        "none: the run's Keel limits no provider.",
    )
    moved: ModelMove | None = Field(
        default=None, description="Set when an earlier model of the run's list failed the step."
    )


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
    cost_usd: float = Field(
        default=0.0,
        description="The call's cost by the worker's price table, so the workflow holds a "
        "cost ceiling with the figure the call was recorded with.",
    )
    over_quota: str | None = Field(
        default=None,
        description="The run's tenant (or requester) has reached a quota with this call: the "
        "sentence naming it. The run finishes this step and stops with `budget`.",
    )

    def spent(self) -> Usage:
        """The tokens and cost of the call."""
        if not self.tokens:
            return Usage(cost_usd=self.cost_usd)
        prompt, completion = self.tokens
        return Usage(prompt_tokens=prompt, completion_tokens=completion, cost_usd=self.cost_usd)


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
    secret_ref: str | None = Field(
        default=None, description="The reference of the secret the user gave for this call."
    )
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
    note: str | None = Field(
        default=None,
        description="Told to the model before the output: the person's changes to the call.",
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
