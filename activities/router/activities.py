"""The router's activities: rule filter, classification, dispatchability, records.

The worker hands in its agent catalogue as lookups and a check of which tools can run
on it, so this module needs nothing of the worker. The classification is one
unstreamed model call whose answer must be a JSON object of `RouterAnswer`'s shape;
anything else is `malformed`, which the decision matrix turns into a question, never
into a guess.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import openai
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from keel.activities.llm.limits import ProviderLimiter
from keel.activities.llm.prices import ModelPrice
from keel.activities.llm.providers.anthropic_messages import AnthropicMessages
from keel.activities.llm.providers.one_shot import OneShotModel
from keel.activities.plugin_api import PluginCode
from keel.activities.store.router_store import RouterStore
from keel.activities.store.run_store import Store
from keel.activities.store.run_tree import RunTreeStore
from keel.activities.tool_events import PREVIEW_CHARS
from keel.workflows.activity_refs import Routing
from keel.workflows.agent_roles import roles_admit
from keel.workflows.router.models import (
    AdoptChildInput,
    AdoptedChild,
    CandidatesInput,
    CandidatesResult,
    Clarification,
    Classification,
    ClassifyInput,
    Dispatchability,
    DispatchInput,
    ExcludedAgent,
    RecordRouteInput,
    RouteCandidate,
)
from keel.workflows.run.agent_spec import AgentSpec

ROUTER_SYSTEM_PROMPT = "You are Keel's request router."
"""How the classification's system prompt starts (the scripted model recognises it)."""
ROUTER_INSTRUCTIONS = (
    "Pick the one agent below that should handle the user's request. Answer with one JSON "
    'object and nothing else: {"agent": NAME or null, "confidence": 0.0-1.0, '
    '"reason": "one sentence", "question": TEXT or null}. '
    "Set `agent` when one agent clearly fits; set `question` (and `agent` null) to ask the "
    "user what they mean when the request is unclear or fits several agents; set both to "
    "null when no agent listed can do it."
)
# The request the model sees is cut to this many characters: enough to classify.
MAX_REQUEST_CHARS = 8_000
MAX_REASON_CHARS = 2_000
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)

AgentList = Callable[[], list[AgentSpec]]
AgentLookup = Callable[[str], AgentSpec | None]
ToolProblem = Callable[[str], str | None]


class RouterAnswer(BaseModel):
    """The JSON object the classification must answer with."""

    model_config = ConfigDict(extra="forbid")

    agent: str | None = Field(default=None, max_length=64)
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)
    question: str | None = Field(default=None, min_length=1, max_length=MAX_REASON_CHARS)


def parse_answer(text: str) -> Classification:
    """The model's text as a classification; `malformed` when it is not the schema's."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        answer = RouterAnswer.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        return Classification(kind="malformed", reason=f"{where}: {first['msg']}"[:300])
    texts = {"agent": answer.agent, "reason": answer.reason, "question": answer.question}
    nul = next((name for name, value in texts.items() if value and "\0" in value), None)
    if nul is not None:
        # No model means a NUL, and Postgres could store neither the decision nor its audit.
        return Classification(kind="malformed", reason=f"{nul}: holds a NUL (\\u0000) character")
    if answer.agent:
        kind = "agent"
    elif answer.question:
        kind = "clarify"
    else:
        kind = "none"
    return Classification(
        kind=kind,  # type: ignore[arg-type]
        agent=answer.agent or None,
        confidence=answer.confidence,
        reason=answer.reason,
        question=answer.question,
    )


def classification_messages(
    agents: list[AgentSpec], request: str, clarifications: list[Clarification]
) -> list[dict[str, Any]]:
    """The classification request: the candidates (name: description), then the request."""
    listing = "\n".join(f"- {a.name}: {a.description or 'no description'}" for a in agents)
    user = f"Request:\n{request[:MAX_REQUEST_CHARS]}"
    for c in clarifications:
        user += f"\n\nYou asked: {c.question}\nThe user answered: {c.answer[:MAX_REQUEST_CHARS]}"
    return [
        {
            "role": "system",
            "content": f"{ROUTER_SYSTEM_PROMPT} {ROUTER_INSTRUCTIONS}\n\nAgents:\n{listing}",
        },
        {"role": "user", "content": user},
    ]


def handover_prompt(request: str, clarifications: list[Clarification]) -> str:
    """The routed child's whole context: the request, and what the user clarified."""
    extra = "".join(f"\n\n(Asked: {c.question}\nAnswered: {c.answer})" for c in clarifications)
    return f"{request}{extra}"


class RouterActivities(Routing):
    """The router's I/O, each activity idempotent (reads, or writes keyed by run and round)."""

    def __init__(
        self,
        store: Store,
        client: openai.AsyncOpenAI,
        agents: AgentList,
        agent: AgentLookup,
        tool_problem: ToolProblem,
        anthropic: AnthropicMessages | None = None,
        prices: dict[str, ModelPrice] | None = None,
        plugins: PluginCode | None = None,
        limits: ProviderLimiter | None = None,
    ) -> None:
        self._store = store
        self._prices = prices or {}
        self._model = OneShotModel(client, anthropic, plugins, limits)
        self._router = RouterStore(store.pool)
        self._agents = agents
        self._agent = agent
        self._tool_problem = tool_problem

    def registered(self) -> list[Callable[..., Any]]:
        """The activities a worker registers, so its list grows by one line only."""
        return [
            self.route_candidates,
            self.classify_route,
            self.check_dispatch,
            self.record_route,
            self.adopt_child_result,
        ]

    @activity.defn(name="route_candidates")
    async def route_candidates(self, request: CandidatesInput) -> CandidatesResult:
        enabled = await self._router.tenant_agents(request.tenant_id)
        allowed = set(enabled.agents) if enabled is not None else None
        roles = set(request.roles)
        result = CandidatesResult()
        for spec in self._agents():
            if allowed is not None and spec.name not in allowed:
                result.excluded.append(ExcludedAgent(name=spec.name, reason="not_enabled"))
            elif not roles_admit(spec.roles, roles):
                result.excluded.append(ExcludedAgent(name=spec.name, reason="role"))
            else:
                result.candidates.append(RouteCandidate(name=spec.name))
        return result

    @activity.defn(name="classify_route")
    async def classify_route(self, request: ClassifyInput) -> Classification:
        agents = [a for a in (self._agent(n) for n in request.candidates) if a is not None]
        text = await self._request(request.run_id)
        messages = classification_messages(agents, text, request.clarifications)
        started = time.monotonic()
        reply = await self._model.complete(
            request.model,
            messages,
            purpose="the routing request",
            run_id=request.run_id,
            temperature=0,
        )
        answer, tokens = reply.text, reply.tokens
        price = self._prices.get(request.model)
        await self._router.record_call(
            run_id=request.run_id,
            step=request.round,
            model=request.model,
            tokens=tokens,
            latency_ms=int((time.monotonic() - started) * 1000),
            attempt=activity.info().attempt,
            cost_usd=price.cost(*tokens) if price is not None else 0.0,
        )
        classification = parse_answer(answer)
        return classification.model_copy(update={"tokens": list(tokens)})

    @activity.defn(name="check_dispatch")
    async def check_dispatch(self, request: DispatchInput) -> Dispatchability:
        spec = self._agent(request.agent)
        if spec is None:
            return Dispatchability(exists=False)
        missing = [t for t in spec.tools if self._tool_problem(t) is not None]
        missing += [f"task:{n}" for n in spec.subagents if self._agent(n) is None]
        return Dispatchability(exists=True, missing_tools=missing)

    @activity.defn(name="record_route")
    async def record_route(self, request: RecordRouteInput) -> None:
        prompt = ""
        if request.decision.outcome == "routed":
            prompt = handover_prompt(await self._request(request.run_id), request.clarifications)
        await self._router.record(request, prompt)

    @activity.defn(name="adopt_child_result")
    async def adopt_child_result(self, request: AdoptChildInput) -> AdoptedChild:
        child = await self._store.get_run(request.child_run_id)
        if child is None:
            raise ApplicationError(
                f"The routed run {request.child_run_id} is not recorded.",
                type="MissingChildRun",
                non_retryable=True,
            )
        status = child.status if child.status in ("completed", "failed", "cancelled") else "failed"
        report = child.report or (
            f"The routed run {child.id} ({child.agent}) ended {status} without a report."
        )
        await self._router.put_report(request.run_id, request.step, report)
        if request.event_seq is not None:
            await self._answer_handover(request)
        return AdoptedChild(
            status=status,  # type: ignore[arg-type]
            stop_reason=child.stop_reason or ("final_answer" if status == "completed" else "error"),
            error=child.error,
        )

    async def _answer_handover(self, request: AdoptChildInput) -> None:
        """The hand-over call's answer, stored and announced as a `task` call's is."""
        assert request.event_seq is not None
        answer = await RunTreeStore(self._store.pool).child_answer(request.child_run_id)
        step = request.handover_step
        await self._store.put_tool_message(
            run_id=request.run_id,
            step=step,
            ord_=request.handover_ord,
            call_id=request.call_id,
            name="task",
            content=answer.text,
            is_error=answer.is_error,
            events=[
                (
                    request.event_seq,
                    "tool_result",
                    {
                        "step": step,
                        "call_id": request.call_id,
                        "name": "task",
                        "is_error": answer.is_error,
                        "size": len(answer.text.encode()),
                        "preview": answer.text[:PREVIEW_CHARS],
                    },
                ),
                (
                    request.event_seq + 1,
                    "child_run",
                    {
                        "run_id": request.child_run_id,
                        "agent": answer.agent,
                        "status": answer.status,
                        "step": step,
                        "call_id": request.call_id,
                    },
                ),
            ],
        )

    async def _request(self, run_id: str) -> str:
        message = await self._store.get_message(run_id, 0, 1)
        if message is None:
            raise ApplicationError(
                f"Run {run_id} has no stored request to route.",
                type="MissingRunTexts",
                non_retryable=True,
            )
        return message.content or ""


def sandbox_tool_problem(bash_problem: str | None) -> ToolProblem:
    """Which tools cannot run on this worker: `bash` without its sandbox, for now."""

    def problem(tool: str) -> str | None:
        return bash_problem if tool == "bash" else None

    return problem
