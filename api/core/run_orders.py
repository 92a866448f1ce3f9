"""What a surface asks for when it starts a run (`RunOrder`), and the workflow input it
makes (`run_input`, then `lean` for the history: texts travel as the key they are
stored under). `RunService.start` takes an order; every surface builds one with
`RunOrder.of`, so they refuse the same input alike.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from keel.activities.store.records import RunRecord
from keel.activities.store.run_store import Store
from keel.activities.store.run_texts import texts_key
from keel.api.core.errors import invalid_request
from keel.api.core.fork_seed import ForkPoint
from keel.api.core.run_models import ModelChoice
from keel.api.core.schemas.common import ChosenId, InputText, LocalTool, StoredText
from keel.api.core.schemas.runs import RunCreate
from keel.api.identity.auth import Principal
from keel.api.identity.config import user_ref
from keel.workflows import timeouts
from keel.workflows.run import budget
from keel.workflows.run.agent_spec import AgentSpec
from keel.workflows.run.model_list import split_models
from keel.workflows.run.models import RunInput, Trigger

__all__ = [
    "OnBusy",
    "RunOrder",
    "StartedRun",
    "as_started",
    "lean",
    "new_run_id",
    "run_input",
    "session_workflow_id",
]

OnBusy = Literal["reject", "enqueue", "interrupt"]


class RunOrder(BaseModel):
    """What a surface asks for when it starts a run, checked as REST checks a `RunCreate`
    (build it with `RunOrder.of`, so every surface refuses the same input alike); the
    service checks the rest (agent, workspace)."""

    agent: StoredText = Field(min_length=1, max_length=64)
    input: InputText
    workspace: StoredText = Field(min_length=1, max_length=4096)
    trigger: Trigger
    run_id: ChosenId | None = None
    session_id: ChosenId | None = None
    on_busy: OnBusy = "reject"
    model: ModelChoice | None = None
    """One model, or a list: the others take a step the one before failed."""

    @field_validator("model")
    @classmethod
    def _model_list(cls, value: str | list[str] | None) -> str | list[str] | None:
        split_models(value)  # an empty list, a name twice: refused with what to fix
        return value

    metadata: dict[StoredText, StoredText] = Field(default_factory=dict, max_length=50)
    approver: StoredText | None = None
    approval_expires_after_s: int | None = None
    webhook_url: str | None = None
    local_tools: list[LocalTool] = Field(default_factory=list, max_length=3)
    session_metadata: dict[str, str] = Field(default_factory=dict)
    """The metadata of the session, when this run creates it."""
    route_only: bool = False
    """With `agent: "auto"`: only decide the agent (see `docs/router.md`)."""
    max_total_tokens: int | None = Field(default=None, ge=1000, le=10_000_000_000)
    """A ceiling on the tokens of the run and its sub-agents; a lower one of the agent's holds."""
    max_cost_usd: float | None = Field(default=None, gt=0, le=1_000_000)
    """A ceiling in US dollars on the run and its sub-agents; a lower one of the agent's holds."""
    fork: ForkPoint | None = None
    """The run and step this run is forked from (`api.core.forks`), if it is a fork."""

    @classmethod
    def from_create(cls, body: RunCreate) -> RunOrder:
        return cls.of(**body.model_dump(mode="json"))

    @classmethod
    def of(cls, **fields: object) -> RunOrder:
        """The order, or `Invalid` naming the first field at fault (and all of them)."""
        try:
            return cls.model_validate(fields)
        except ValidationError as exc:
            raise invalid_request(exc) from exc

    def request_hash(self, user: Principal) -> str:
        """The request as the run id's owner made it: a retry must hash the same. How to
        deliver it to a busy session is not part of the run, so `on_busy` is left out."""
        body = self.model_dump(mode="json", exclude={"run_id", "on_busy"})
        if not body["route_only"]:
            del body["route_only"]  # so requests recorded before the router hash the same
        for ceiling in ("max_total_tokens", "max_cost_usd"):
            if body[ceiling] is None:
                del body[ceiling]  # so requests recorded before the ceiling hash the same
        if body["fork"] is None:
            del body["fork"]  # so requests recorded before forks hash the same
        body["requester"] = [user.tenant_id, user.subject]
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class StartedRun(BaseModel):
    """The run a start answered with; `position` and `interrupted` for session runs."""

    record: RunRecord
    position: int = 0
    interrupted: str | None = None


def new_run_id(given: str | None) -> str:
    return given or f"run-{uuid.uuid4().hex[:16]}"


def session_workflow_id(session_id: str) -> str:
    return f"session-{session_id}"


def run_input(
    *,
    run_id: str,
    agent: AgentSpec,
    order: RunOrder,
    model: str,
    workspace: Path,
    user: Principal,
    llm_max_attempts: int,
    schedule_id: str | None = None,
    max_parallel_subagents: int = 4,
    fallback_models: list[str] | None = None,
    provider_limits: bool = False,
) -> RunInput:
    """The workflow's input for an order, with the texts still inline."""
    limits = budget.lowered(agent.limits, order.max_total_tokens, order.max_cost_usd)
    if limits != agent.limits:
        agent = agent.model_copy(update={"limits": limits})
    return RunInput(
        run_id=run_id,
        agent=agent,
        input=order.input,
        model=model,
        fallback_models=fallback_models or [],
        provider_limits=provider_limits,
        workspace=str(workspace),
        tenant_id=user.tenant_id,
        requester=user_ref(user),
        trigger=order.trigger,
        session_id=order.session_id,
        llm_max_attempts=llm_max_attempts,
        approver=order.approver,
        approval_expires_after_s=order.approval_expires_after_s,
        webhook_url=order.webhook_url,
        # An A2A task's clients may set push notification configs at any time.
        push_notifications=order.trigger == "a2a",
        schedule_id=schedule_id,
        max_parallel_subagents=max_parallel_subagents,
        local_tools=list(order.local_tools),
    )


def lean(run: RunInput, *, fast_model: bool) -> RunInput:
    """The run as its workflow gets it: the system prompt and input travel as the key
    they are stored under, so the history holds neither whatever their size, and the
    workflow never reads the agent's description either."""
    key = texts_key(run.agent.system_prompt, run.input)
    agent = run.agent.model_copy(update={"system_prompt": "", "description": ""})
    return run.model_copy(
        update={"agent": agent, "input": "", "texts_key": key, "fast_model": fast_model}
    )


async def as_started(store: Store, run: RunInput) -> RunInput:
    """The run as its workflow gets it, texts stored, for callers that start workflows
    themselves (benchmarks and tests); users' runs start through `RunService.start`."""
    await store.put_run_texts(run.tenant_id, run.agent.system_prompt, run.input)
    return lean(run, fast_model=await store.model_is_fast(run.model, timeouts.LLM_LOCAL_BELOW_MS))
