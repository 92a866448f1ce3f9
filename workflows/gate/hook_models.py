"""Plugin hook payloads: `tool.before` verdicts, `tool.after` and `run.end`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from keel.workflows.gate.plugin_refs import HookRef
from keel.workflows.gate.tool_specs import Risk
from keel.workflows.run.models import RunStatus, StopReason
from keel.workflows.run.step_models import ToolCallInput


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
