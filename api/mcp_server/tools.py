"""The MCP tools: list agents, start runs, follow them and decide what they wait on.

Each tool acts as the caller of the HTTP request that carried it, within that caller's
tenant, through the same functions the REST API uses; a refusal comes back as a tool
error with the sentence a REST caller would read.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import HTTPException
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, ValidationError
from starlette.datastructures import State

from api.core import run_factory
from api.core.decisions import decide_interaction
from api.core.run_reads import live_run, run_for
from api.core.schemas import (
    DecisionResult,
    InteractionDecisionCreate,
    InteractionPublic,
    RunCreate,
    StoredText,
)
from api.identity.auth import Principal
from api.mcp_server.results import (
    AgentInfo,
    AgentList,
    RunDetail,
    RunSummaries,
    RunSummary,
    StartedRun,
)
from api.mcp_server.tool_errors import invalid_arguments, refusal
from worker.agent_catalog import AgentCatalog

RunId = Annotated[StoredText, Field(min_length=1, max_length=200, description="The run's id.")]


def caller(ctx: Context) -> Principal:
    """Who sent the HTTP request that carried this call; `McpEndpoint` verified it."""
    request = ctx.request_context.request
    principal = getattr(getattr(request, "state", None), "principal", None)
    if not isinstance(principal, Principal):
        # Fail closed: a call must never run without a verified caller.
        raise RuntimeError("An MCP call reached a tool without an authenticated caller.")
    return principal


class KeelTools:
    """The tools, bound to the API's clients and stores (the app's `state`)."""

    def __init__(self, state: State) -> None:
        self._state = state

    async def list_agents(self) -> AgentList:
        """List the agents Keel can run: the name to pass to start_run and what each does."""
        catalog: AgentCatalog = self._state.catalog
        return AgentList(
            agents=[AgentInfo(name=a.name, description=a.description) for a in catalog.all()]
        )

    async def start_run(
        self,
        ctx: Context,
        agent: Annotated[str, Field(description="The agent to run, as list_agents names it.")],
        input: Annotated[str, Field(description="The task for the agent, in plain language.")],
        workspace: Annotated[
            str,
            Field(
                description="The directory the run works on: absolute, or relative to the "
                "server's workspace root, and inside that root."
            ),
        ],
        session_id: Annotated[
            str | None,
            Field(
                description="Join (or start) this session: the run sees the session's "
                "earlier messages."
            ),
        ] = None,
        run_id: Annotated[
            str | None,
            Field(
                description="Choose the run's id to make the call safe to retry: a second "
                "call with the same id answers with the run the first one started."
            ),
        ] = None,
        on_busy: Annotated[
            Literal["reject", "enqueue", "interrupt"],
            Field(
                description="If the session already has a run going: refuse, queue, or cancel it."
            ),
        ] = "reject",
    ) -> StartedRun:
        """Start a run of a Keel agent on a workspace. It runs durably in the background:
        follow it with get_run until its status is completed, failed or cancelled, and
        answer the approvals or questions it waits on with decide."""
        user = caller(ctx)
        try:
            body = RunCreate(
                agent=agent,
                input=input,
                workspace=workspace,
                session_id=session_id,
                run_id=run_id,
                on_busy=on_busy,
                trigger="api",
            )
        except ValidationError as exc:
            raise ToolError(invalid_arguments("start_run", exc)) from None
        state = self._state
        try:
            record = await run_factory.start_run(
                body,
                user,
                temporal=state.temporal,
                store=state.store,
                sessions=state.sessions,
                settings=state.settings,
                catalog=state.catalog,
                audit=state.audit,
            )
        except HTTPException as exc:
            raise ToolError(refusal(exc)) from None
        return StartedRun(
            run_id=record.id, agent=record.agent, status=record.status, session_id=record.session_id
        )

    async def get_run(self, ctx: Context, run_id: RunId) -> RunDetail:
        """Read a run: its status, stop reason, report (once it has finished), token usage
        and cost, and the approvals or questions it waits on now (decide answers them)."""
        user = caller(ctx)
        state = self._state
        try:
            record = await run_for(run_id, user, state.store, state.audit)
        except HTTPException as exc:
            raise ToolError(refusal(exc)) from None
        run = await live_run(record, state.temporal)
        waiting = set(run.pending_interactions)
        # Only what the store mirrors can be decided yet; the next read shows the rest.
        pending = [
            InteractionPublic.from_interaction(run.id, ia)
            for ia in await state.interactions.for_run(run.id)
            if ia.id in waiting
        ]
        return RunDetail(run=run, pending_interactions=pending)

    async def list_runs(
        self,
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=200, description="How many runs, at most.")] = 20,
    ) -> RunSummaries:
        """List your tenant's most recent runs, newest first; get_run has the details."""
        user = caller(ctx)
        runs = await self._state.store.list_runs(tenant_id=user.tenant_id, limit=limit)
        return RunSummaries(runs=[RunSummary.from_record(run) for run in runs])

    async def decide(
        self,
        ctx: Context,
        run_id: RunId,
        interaction_id: Annotated[
            StoredText,
            Field(min_length=1, max_length=200, description="The id get_run lists it under."),
        ],
        decision: Annotated[
            Literal["approve", "approve_always", "reject", "answer"],
            Field(
                description="approve (or approve_always: also future calls like it in this "
                "session) or reject a tool call; answer (with `text`) or reject a question."
            ),
        ],
        payload_hash: Annotated[
            str | None,
            Field(
                description="The payload_hash get_run showed with the proposal; required to "
                "approve, so what runs is exactly what you approved."
            ),
        ] = None,
        text: Annotated[
            str | None, Field(description="The answer to a question, or why you reject.")
        ] = None,
    ) -> DecisionResult:
        """Decide an approval or a question a run waits on. Only the run's requester or its
        named approver may decide; a decision takes once, before the request expires."""
        user = caller(ctx)
        try:
            body = InteractionDecisionCreate(
                decision=decision, payload_hash=payload_hash, text=text
            )
        except ValidationError as exc:
            raise ToolError(invalid_arguments("decide", exc)) from None
        state = self._state
        try:
            return await decide_interaction(
                run_id,
                interaction_id,
                body,
                user,
                store=state.store,
                interactions=state.interactions,
                temporal=state.temporal,
                audit=state.audit,
            )
        except HTTPException as exc:
            raise ToolError(refusal(exc)) from None
