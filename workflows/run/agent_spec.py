"""An agent as the workflow sees it: its limits, approval policy and spec."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from keel.workflows.gate.mcp_models import McpServerSpec
from keel.workflows.gate.permissions import PermissionRule
from keel.workflows.gate.plugin_refs import HookRef, PluginToolRef
from keel.workflows.gate.tool_specs import Risk
from keel.workflows.run.model_list import split_models


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
        default=None,
        ge=1,
        description="Prompt plus completion tokens of the run and its sub-agents: a ceiling "
        "(`budget.reached`).",
    )
    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        le=1_000_000,
        description="US dollars the run and its sub-agents may spend on model calls, by the "
        "worker's price table: a ceiling (`budget.reached`).",
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


class AgentSpec(BaseModel):
    """An agent definition as the workflow sees it (loaded from a Markdown file)."""

    name: str
    description: str = ""
    system_prompt: str = Field(default="", description="Empty when the run's texts hold it.")
    model: str | None = Field(
        default=None,
        description="Overrides the default model; a file may list several (`fallback_models`).",
    )
    fallback_models: list[str] = Field(
        default_factory=list,
        description="The rest of a `model:` list: each takes a step the one before failed.",
    )
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

    @model_validator(mode="before")
    @classmethod
    def _model_list(cls, data: Any) -> Any:
        """`model: [first, fallback, …]` in a file: the first, then `fallback_models`."""
        if isinstance(data, dict) and isinstance(data.get("model"), list):
            if data.get("fallback_models"):
                raise ValueError("Give fallback models in the `model:` list, not both.")
            first, rest = split_models(data["model"])
            data = {**data, "model": first, "fallback_models": rest}
        return data
