"""Sub-agent payloads: the `task` call a child knows, its plan, and its notices."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from keel.workflows.run.agent_spec import AgentSpec
from keel.workflows.usage.models import Usage

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
    max_cost_usd: float | None = Field(
        default=None, gt=0, description="The child's share of the parent's cost ceiling."
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
    fallback_models: list[str] | None = Field(
        default=None, description="The child agent's own fallbacks; none: its parent's."
    )
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
