"""Payloads of the capability router (`agent: "auto"`): request, candidates, decision.

Pure models, no I/O: the run's workflow carries them between the router's activities
(`keel.activities.router.activities`) and the decision matrix
(`keel.workflows.router.matrix`). Fields added later get defaults, so recorded
histories keep replaying.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

ROUTER_AGENT = "auto"
"""The agent name that asks the router to pick the agent."""

RouteOutcome = Literal["routed", "refused", "clarifying", "route_only"]


class RouteRequest(BaseModel):
    """What a router run knows of its caller: set on `RunInput.route` for `agent: "auto"`."""

    roles: list[str] = Field(
        default_factory=list, description="The caller's roles, for agents' `roles:` lists."
    )
    route_only: bool = Field(
        default=False, description="Decide and report the agent, but start no run of it."
    )


class RouteCandidate(BaseModel):
    """An agent the caller may be routed to (its description stays in the activities)."""

    name: str


class ExcludedAgent(BaseModel):
    """A catalogue agent the rule filter left out, and why."""

    name: str
    reason: Literal["not_enabled", "role"]


class CandidatesInput(BaseModel):
    """Input of `route_candidates`: the rule filter for one tenant and caller."""

    run_id: str
    tenant_id: str
    roles: list[str] = Field(default_factory=list)


class CandidatesResult(BaseModel):
    """Output of `route_candidates`."""

    candidates: list[RouteCandidate] = Field(default_factory=list)
    excluded: list[ExcludedAgent] = Field(default_factory=list)


class Clarification(BaseModel):
    """A question the router asked and the user's answer to it."""

    question: str
    answer: str


class ClassifyInput(BaseModel):
    """Input of `classify_route`: one model call over the request and the candidates.

    The request is read from the run's stored input, so it is not in the history."""

    run_id: str
    tenant_id: str
    round: int = Field(ge=1, description="1 for the first classification, +1 per answer.")
    model: str
    candidates: list[str]
    clarifications: list[Clarification] = Field(default_factory=list)


ClassificationKind = Literal["agent", "clarify", "none", "malformed"]


class Classification(BaseModel):
    """Output of `classify_route`: the model's answer, schema-checked."""

    kind: ClassificationKind
    agent: str | None = None
    confidence: float = 0.0
    reason: str = ""
    question: str | None = None
    tokens: list[int] = Field(default_factory=list, description="[prompt, completion] spent.")


class DispatchInput(BaseModel):
    """Input of `check_dispatch`: can the workers run this agent?"""

    agent: str


class Dispatchability(BaseModel):
    """Output of `check_dispatch`."""

    exists: bool
    missing_tools: list[str] = Field(
        default_factory=list, description="Tools of the agent no worker can run now."
    )


class RouteDecision(BaseModel):
    """What the decision matrix decided, and why, in a sentence a user can read."""

    outcome: RouteOutcome
    agent: str | None = None
    reason: str
    question: str | None = Field(default=None, description="`clarifying`: what to ask.")


class RecordRouteInput(BaseModel):
    """Input of `record_route`: persist, emit and audit one decision.

    A `routed` decision also stores the router's hand-over (a `task` call naming the
    agent and the request as its prompt), which the child run reads when it opens."""

    run_id: str
    tenant_id: str
    requester: str
    round: int
    event_seq: int
    decision: RouteDecision
    classification: Classification
    candidates: list[str]
    excluded: list[ExcludedAgent]
    clarifications: list[Clarification] = Field(default_factory=list)
    dispatch: Dispatchability | None = None


class AdoptChildInput(BaseModel):
    """Input of `adopt_child_result`: the router's report becomes its child's.

    The hand-over's answer is stored too, like a `task` call's: its tool message and its
    `tool_result` and final `child_run` events, so every reader sees the call end."""

    run_id: str
    child_run_id: str
    step: int = Field(description="The router's step whose message holds the report.")
    handover_step: int = Field(default=0, description="The step of the hand-over call.")
    handover_ord: int = 2
    call_id: str = ""
    event_seq: int | None = Field(
        default=None, description="Seqs of the hand-over's `tool_result` and `child_run`."
    )


class AdoptedChild(BaseModel):
    """Output of `adopt_child_result`: how the child ended."""

    status: Literal["completed", "failed", "cancelled"]
    stop_reason: str = "final_answer"
    error: str | None = None
