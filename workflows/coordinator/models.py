"""Payloads of the coordinator and its A2A client activities."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from keel.workflows.run.findings import Finding, MergedFinding


class RemoteAgent(BaseModel):
    """An A2A agent to delegate to: its base URL (where its agent card is served)."""

    url: str = Field(pattern=r"^https?://", max_length=2048)
    name: str | None = Field(default=None, description="Section title; default: the card's name.")


class CoordinatorInput(BaseModel):
    """Input of `CoordinatorWorkflow`."""

    task: str = Field(min_length=1, max_length=200_000)
    agents: list[RemoteAgent] = Field(min_length=1, max_length=20)
    tenant_id: str = "default"
    requester: str = "user:local"
    timeout_s: int = Field(default=1800, ge=5, le=7 * 86_400, description="Per agent.")


class DelegateInput(BaseModel):
    """Input of `a2a_send`: hand the task to one agent."""

    url: str
    text: str
    message_id: str = Field(description="Deterministic, so a retried send can be recognised.")
    tenant_id: str
    requester: str


class DelegateHandle(BaseModel):
    """Output of `a2a_send`: where the remote task is, and what its card said."""

    url: str
    rpc_url: str
    task_id: str
    agent_name: str
    state: str
    report: str | None = None
    error: str | None = None
    findings: list[Finding] | None = Field(
        default=None, description="The structured findings of the task's artifacts, if any."
    )


class FollowInput(BaseModel):
    """Input of `a2a_follow`: wait for a remote task to finish."""

    handle: DelegateHandle
    tenant_id: str
    requester: str
    deadline_s: int


class AgentOutcome(BaseModel):
    """What one agent contributed, or why it did not."""

    url: str
    agent_name: str
    status: Literal["completed", "failed", "timed_out", "input_required", "unreachable"]
    task_id: str | None = None
    report: str | None = None
    error: str | None = None
    findings: list[Finding] | None = None


class CoordinatorResult(BaseModel):
    """Output of `CoordinatorWorkflow`: the merged report and each agent's outcome."""

    report: str
    outcomes: list[AgentOutcome]
    findings: list[MergedFinding] = Field(
        default_factory=list,
        description="The agents' structured findings, one per file and line, most severe first.",
    )
