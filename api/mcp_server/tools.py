"""The MCP tools: list agents, start runs, follow them and decide what they wait on.

Each tool acts as the caller of the HTTP request that carried it, within that caller's
tenant, through the same functions the REST API uses; a refusal comes back as a tool
error with the sentence a REST caller would read.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, ValidationError

from keel.api.core.errors import KeelError
from keel.api.core.router import router_agent
from keel.api.core.run_orders import RunOrder
from keel.api.core.schemas.common import StoredText
from keel.api.core.schemas.forks import ForkCreate
from keel.api.core.schemas.grants import GrantScopeCreate
from keel.api.core.schemas.interactions import DecisionResult, InteractionDecisionCreate
from keel.api.core.schemas.runs import RunCreate, RunPublic
from keel.api.core.service import KeelService
from keel.api.identity.auth import Principal
from keel.api.mcp_server.results import (
    AgentInfo,
    AgentList,
    RunDetail,
    RunSummaries,
    RunSummary,
    StartedRun,
)
from keel.api.mcp_server.run_wait import MAX_WAIT_S, RunWait
from keel.api.mcp_server.tool_errors import invalid_arguments, refusal

RunId = Annotated[StoredText, Field(min_length=1, max_length=200, description="The run's id.")]


def caller(ctx: Context) -> Principal:
    """Who sent the HTTP request that carried this call; `McpEndpoint` verified it."""
    return principal_of(ctx.request_context.request)


def principal_of(request: object) -> Principal:
    """The verified caller `McpEndpoint` put on the HTTP request."""
    principal = getattr(getattr(request, "state", None), "principal", None)
    if not isinstance(principal, Principal):
        # Fail closed: a call must never run without a verified caller.
        raise RuntimeError("An MCP call reached a tool without an authenticated caller.")
    return principal


class KeelTools:
    """The tools, bound to the API's one service."""

    def __init__(self, service: KeelService, waiter: RunWait | None = None) -> None:
        self._service = service
        self._waiter = waiter

    async def list_agents(self, ctx: Context) -> AgentList:
        """List the agents Keel can run for you: the name to pass to start_run and what each
        does; `auto` picks one of them for a request."""
        usable = [*self._service.access.usable(caller(ctx)), router_agent()]
        return AgentList(agents=[AgentInfo(name=a.name, description=a.description) for a in usable])

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
        wait: Annotated[
            int,
            Field(
                ge=0,
                le=MAX_WAIT_S,
                description="Seconds to wait for the run to finish or to need you before "
                "answering (0: answer at once). While it waits, progress notifications "
                "follow the run if the request carries a progressToken.",
            ),
        ] = 0,
        max_total_tokens: Annotated[
            int | None,
            Field(
                description="A ceiling on the tokens of the run and its sub-agents; reached, "
                "the run stops with stop reason budget and reports what it has."
            ),
        ] = None,
        max_cost_usd: Annotated[
            float | None,
            Field(
                description="A ceiling in US dollars on the run and its sub-agents' model "
                "calls; reached, the run stops with stop reason budget."
            ),
        ] = None,
    ) -> StartedRun:
        """Start a run of a Keel agent on a workspace. It runs durably in the background:
        follow it with get_run until its status is completed, failed or cancelled, and
        answer the approvals or questions it waits on with decide. With `wait`, the call
        answers once the run has finished or waits for you, or after that many seconds."""
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
                max_total_tokens=max_total_tokens,
                max_cost_usd=max_cost_usd,
            )
        except ValidationError as exc:
            raise ToolError(invalid_arguments("start_run", exc)) from None
        try:
            record = (await self._service.runs.start(RunOrder.from_create(body), user)).record
        except KeelError as exc:
            raise ToolError(refusal(exc)) from None
        shown = RunPublic.from_record(record)  # the ids as the caller's tenant knows them
        note = None
        if wait and self._waiter is not None:
            try:
                shown = await self._waiter.follow(record, user, ctx, wait)
            except KeelError as exc:
                # The run started: its id, not a tool error, so a retry does not start another.
                note = (
                    f"The run started, but waiting for it failed: {exc.message} "
                    f"Follow it with get_run (run_id {shown.id}); do not start it again."
                )
        return StartedRun(
            run_id=shown.id,
            agent=shown.agent,
            status=shown.status,
            session_id=shown.session_id,
            pending_interactions=shown.pending_interactions,
            report=shown.report if wait else None,
            note=note,
        )

    async def get_run(self, ctx: Context, run_id: RunId) -> RunDetail:
        """Read a run: its status, stop reason, report (once it has finished), token usage
        and cost, and the approvals or questions it waits on now (decide answers them)."""
        user = caller(ctx)
        runs = self._service.runs
        try:
            run = await runs.live(await runs.get(run_id, user))
            waiting = set(run.pending_interactions)
            # Only what the store mirrors can be decided yet; the next read shows the rest.
            pending = [ia for ia in await runs.interactions(run.id, user) if ia.id in waiting]
        except KeelError as exc:
            raise ToolError(refusal(exc)) from None
        return RunDetail(run=run, pending_interactions=pending)

    async def fork_run(
        self,
        ctx: Context,
        run_id: RunId,
        step: Annotated[
            int,
            Field(
                description="The last step kept: one model call and its tool results "
                "(0: only the task). get_run's `steps` says how many the run has."
            ),
        ],
        message: Annotated[
            str | None,
            Field(description="A user message the fork reads after the kept steps."),
        ] = None,
        replace_message: Annotated[
            bool, Field(description="The message replaces the run's task instead.")
        ] = False,
        new_run_id: Annotated[
            str | None,
            Field(description="Choose the fork's id to make the call safe to retry."),
        ] = None,
    ) -> RunDetail:
        """Fork a run at a step: a new run of the same agent and workspace starts from the
        run's conversation up to that step (and your message); the run itself is left as
        it is. Files its tools wrote and commands they ran are not undone."""
        user = caller(ctx)
        try:
            body = ForkCreate(
                step=step, message=message, replace_message=replace_message, run_id=new_run_id
            )
        except ValidationError as exc:
            raise ToolError(invalid_arguments("fork_run", exc)) from None
        try:
            started = await self._service.forks.fork(run_id, body, user)
        except KeelError as exc:
            raise ToolError(refusal(exc)) from None
        return RunDetail(run=RunPublic.from_record(started.record), pending_interactions=[])

    async def list_runs(
        self,
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=200, description="How many runs, at most.")] = 20,
    ) -> RunSummaries:
        """List your tenant's most recent top-level runs (not sub-agent runs), newest first;
        get_run has the details."""
        user = caller(ctx)
        # As on REST: the runs the caller started, not the sub-agent runs under them.
        listed = await self._service.run_list.page(user, limit=limit, before=None)
        return RunSummaries(
            runs=[
                RunSummary.from_record(run).model_copy(update={"status": listed.status_of(run)})
                for run in listed.runs
            ]
        )

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
                description="approve (or approve_always: also future calls like it, by "
                "default in this session; see `grant`) or reject a tool call; answer (with "
                "`text`) or reject a question."
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
        arguments: Annotated[
            dict[str, object] | None,
            Field(
                description="With approve: edited arguments to run instead of the proposed "
                "ones (checked like the model's call; the run's model is told what changed)."
            ),
        ] = None,
        grant: Annotated[
            GrantScopeCreate | None,
            Field(
                description="With approve_always: how far it reaches — kind call, run, "
                "session or agent; a glob `pattern` over the subject; `until` (ISO time)."
            ),
        ] = None,
    ) -> DecisionResult:
        """Decide an approval or a question a run waits on. Only the run's requester or its
        named approver may decide; a decision takes once, before the request expires."""
        user = caller(ctx)
        try:
            body = InteractionDecisionCreate(
                decision=decision,
                payload_hash=payload_hash,
                text=text,
                arguments=arguments,
                grant=grant,
            )
        except ValidationError as exc:
            raise ToolError(invalid_arguments("decide", exc)) from None
        try:
            return await self._service.decisions.decide(run_id, interaction_id, body, user)
        except KeelError as exc:
            raise ToolError(refusal(exc)) from None
