"""Runs: the one way a run starts (whichever surface asks), is read, and is cancelled.

Starting is record-then-start, idempotent on the run id: the run's row and texts are
written in one transaction with the hash of the request, then its workflow is started
(or handed to its session). A retry of the same request finds the row and starts the
workflow again if it is still queued, which Temporal's id policy makes harmless; the
same run id with another request is a conflict. If Temporal does not answer, the row
is removed again and the caller gets a 503 to retry, so no run says it is queued
while nothing will ever run it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from keel.activities.store.fork_rows import ForkRows
from keel.activities.store.records import EventRecord, MessageRecord, NewRun, RunRecord
from keel.api.core.agent_access import AgentAccess
from keel.api.core.context import RETRY_AFTER_S, TEMPORAL_CALL_TIMEOUT, CoreParts
from keel.api.core.errors import (
    Conflict,
    Invalid,
    Misconfigured,
    NotFound,
    Unavailable,
    known_id,
)
from keel.api.core.grants import GrantService
from keel.api.core.quotas import QuotaService
from keel.api.core.router import router_agent, with_route
from keel.api.core.run_live import RunLiveState
from keel.api.core.run_models import run_models
from keel.api.core.run_orders import (
    OnBusy,
    RunOrder,
    StartedRun,
    lean,
    new_run_id,
    run_input,
    session_workflow_id,
)
from keel.api.core.run_tree import child_owning, tree_interactions
from keel.api.core.schemas.interactions import InteractionPublic
from keel.api.core.schemas.runs import RunPublic
from keel.api.core.session_home import on_our_queue
from keel.api.core.temporal_errors import from_temporal, namespace_missing, temporal_refusals
from keel.api.core.tenant_ids import TenantIds, in_view, interaction_key, scoped
from keel.api.core.webhook_guard import check_webhook
from keel.api.core.workspaces import TenantWorkspaces
from keel.api.identity.auth import Principal
from keel.workflows import timeouts
from keel.workflows.router.models import ROUTER_AGENT
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.agent_spec import AgentSpec
from keel.workflows.run.fair_share import tenant_priority
from keel.workflows.run.models import RunInput
from keel.workflows.run.run_visibility import run_memo, run_search_attributes
from keel.workflows.sessions.models import (
    SessionState,
    SessionSubmission,
    SubmitOutcome,
    Withdrawal,
    WithdrawOutcome,
)
from keel.workflows.sessions.workflow import SessionWorkflow

FINISHED = ("completed", "failed", "cancelled")
# The session workflow takes a message through an update, which a worker runs: long
# enough for a worker that is starting up; Temporal itself being down shows sooner.
SUBMIT_WAIT = timedelta(seconds=30)
SESSION_DOWN = (
    "Temporal (or a worker for the session) did not answer, so the message was not "
    "queued; retry the same request (with the same run_id) shortly."
)
TEMPORAL_DOWN = (
    "Temporal did not answer, so the run was not started; retry the same request "
    "(with the same run_id) shortly."
)


@temporal_refusals("serve the run")
class RunService:
    """Start, read and cancel runs, within the caller's tenant."""

    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts
        self.ids = TenantIds(parts)
        self.access = AgentAccess(parts)
        self.quotas = QuotaService(parts)  # tenant quotas: every new run passes `admit`
        self.workspaces = TenantWorkspaces(parts)
        self._live = RunLiveState(parts)
        self._forks = ForkRows(parts.store.pool)
        self.grants = GrantService(parts)

    # -- checks shared with sessions and schedules --------------------------

    def agent(self, name: str) -> AgentSpec:
        catalog = self._parts.catalog
        if name == ROUTER_AGENT:
            return router_agent()
        agent = catalog.get(name)
        if agent is None:
            raise Invalid(
                f"Unknown agent '{name}'. Known agents: {', '.join(catalog.names())}.",
                field="agent",
            )
        return agent

    async def usable_agent(self, name: str, user: Principal, *, via: str) -> AgentSpec:
        """The agent `name`, if it exists (`Invalid`) and the caller may use it (`Forbidden`,
        audited)."""
        agent = self.agent(name)
        await self.access.require(agent, user, via=via)
        return agent

    async def workspace(self, raw: str, user: Principal) -> Path:
        """The caller's workspace `raw` names (`api.core.workspaces`)."""
        return await self.workspaces.resolve(raw, user)

    async def template(
        self, order: RunOrder, user: Principal, *, run_id: str = "", schedule_id: str | None = None
    ) -> RunInput:
        """The workflow input an order makes, checked (agent, workspace), texts inline."""
        agent = self.agent(order.agent)
        settings = self._parts.settings
        foreign = [t for t in order.local_tools if t not in agent.tools]
        if foreign:
            raise Invalid(
                f"local_tools: {foreign} are not tools of the agent '{agent.name}', which has "
                f"{agent.tools}; list only its read tools.",
                field="local_tools",
            )
        if order.route_only and agent.name != ROUTER_AGENT:
            raise Invalid(
                f'route_only asks the router only; send agent "{ROUTER_AGENT}" with it.',
                field="route_only",
            )
        models = run_models(order.model, agent, settings)
        run = run_input(
            run_id=run_id,
            agent=agent,
            order=order,
            model=models[0],
            fallback_models=models[1],
            workspace=await self.workspace(order.workspace, user),
            user=user,
            llm_max_attempts=settings.llm_max_attempts,
            schedule_id=schedule_id,
            max_parallel_subagents=settings.max_parallel_subagents,
            provider_limits=bool(settings.provider_limits),
        )
        if run.agent.limits.max_cost_usd is not None and run.model not in settings.prices:
            # Unpriced, every call would cost 0: the ceiling would never hold.
            raise Invalid(
                f"The model {run.model} has no price in this Keel's price table "
                "(KEEL_PRICES), so a ceiling in US dollars cannot hold it; add its price, "
                "or set a ceiling in tokens instead.",
                field="max_cost_usd",
            )
        return with_route(run, order.route_only, user)

    # -- starting -----------------------------------------------------------

    async def start(
        self, order: RunOrder, user: Principal, *, seed: Sequence[MessageRecord] = ()
    ) -> StartedRun:
        """Start the run an order asks for; with `session_id`, it joins that session
        (created if new). A retried order with the same `run_id` answers with its run.
        A fork's order comes with its `seed` (`api.core.forks`), written with its row."""
        parts = self._parts
        await check_webhook(parts, order.webhook_url, user)
        run = await self.template(order, user, run_id=await self._key_for(order.run_id, user))
        await self.access.require(run.agent, user, via=order.trigger)
        if order.session_id is not None:
            session_key = await self._join_session(order, run, user)
            run = run.model_copy(update={"session_id": session_key})
        # Hashed as checked (the workspace resolved), so spellings of one request agree.
        request_hash = order.model_copy(update={"workspace": run.workspace}).request_hash(user)
        existing = await parts.store.get_run(run.run_id)
        if existing is None:
            await self.quotas.admit(user, via=order.trigger)  # a retry of a started run is not new
            if run.session_id is not None and order.on_busy == "reject":
                await self._refuse_if_busy(run.session_id, run.run_id, user)
            row = NewRun.of(run, metadata=order.metadata, request_hash=request_hash)
            if await self._create(row, order, seed):
                return await self._launch(run, order, fresh=True)
            existing = await parts.store.get_run(run.run_id)  # a concurrent twin won
            assert existing is not None
            if existing.tenant_id != user.tenant_id and order.run_id is not None:
                # Another tenant took the id a moment ago: this tenant's is the scoped key.
                return await self.start(order, user, seed=seed)
        await self._same_request(existing, user, request_hash)
        if existing.status == "queued" and existing.started_at is None:
            # Recorded, perhaps never started (an earlier attempt may have failed half-way):
            # start it; Temporal's id policy makes a second start of a started run a no-op.
            return await self._launch(run, order, fresh=False)
        return StartedRun(record=existing)

    async def _create(self, row: NewRun, order: RunOrder, seed: Sequence[MessageRecord]) -> bool:
        if order.fork is None:
            return await self._parts.store.create_run(row)
        return await self._forks.create_fork(
            row, forked_from=order.fork.run_id, step=order.fork.step, seed=seed
        )

    async def _key_for(self, chosen: str | None, user: Principal) -> str:
        """The key of the run a caller's chosen run id names in its tenant (a new id if
        none was chosen): the id itself, unless another tenant holds it."""
        if chosen is None:
            return new_run_id(None)
        return await self.ids.run_key(chosen, user)

    async def _join_session(self, order: RunOrder, run: RunInput, user: Principal) -> str:
        """The session the run joins (created if new); its key."""
        assert order.session_id is not None
        session = await self.ids.open_session(
            order.session_id,
            user,
            agent=run.agent.name,
            workspace=run.workspace,
            model=run.model if order.model is not None else None,
            approver=order.approver,
            metadata=order.session_metadata,
        )
        return session.id

    async def _same_request(self, existing: RunRecord, user: Principal, request_hash: str) -> None:
        if existing.tenant_id != user.tenant_id:
            await self._parts.audit.cross_tenant(user, "run", existing.id)
            raise Conflict("That run id is taken; choose another.", field="run_id")
        if existing.request_hash is not None and existing.request_hash != request_hash:
            raise Conflict(
                f"Run {in_view(user.tenant_id, existing.id)} was started by a different "
                "request; send exactly the "
                "same request to retry it, or choose another run_id for a new run.",
                field="run_id",
            )

    async def _refuse_if_busy(self, session_id: str, run_id: str, user: Principal) -> None:
        # Postgres says when a run has finished, a moment before its session workflow knows.
        busy = await self._parts.store.session_busy(session_id, besides=run_id)
        if busy is not None:
            shown = in_view(user.tenant_id, session_id), in_view(user.tenant_id, busy)
            raise Conflict(
                f"Session {shown[0]} is busy with run {shown[1]}; send on_busy=enqueue or "
                "interrupt, or wait for it to finish."
            )

    async def _launch(self, run: RunInput, order: RunOrder, *, fresh: bool) -> StartedRun:
        """Start the recorded run's workflow (or hand it to its session)."""
        parts = self._parts
        fast = await parts.store.model_is_fast(run.model, timeouts.LLM_LOCAL_BELOW_MS)
        started = lean(await self.grants.with_grants(run), fast_model=fast)
        outcome = SubmitOutcome(run_id=run.run_id, position=0)
        try:
            if run.session_id is None:
                await self._start_workflow(started)
            else:
                outcome = await self._submit(started, order.on_busy)
        except (Conflict, Unavailable, Misconfigured):
            if fresh:
                await parts.store.forget_unstarted_run(run.run_id)
            raise
        record = await parts.store.get_run(run.run_id)
        if record is None:  # the session withdrew it already, or a failed twin forgot it
            raise Unavailable(TEMPORAL_DOWN, retry_after_s=RETRY_AFTER_S)
        return StartedRun(record=record, position=outcome.position, interrupted=outcome.interrupted)

    async def _start_workflow(self, run: RunInput) -> None:
        try:
            await self._parts.temporal.start_workflow(
                AgentRunWorkflow.run,
                run,
                id=run.run_id,
                task_queue=self._parts.settings.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                rpc_timeout=TEMPORAL_CALL_TIMEOUT,
                search_attributes=run_search_attributes(run),
                memo=run_memo(run),
                priority=tenant_priority(run.tenant_id),  # fair shares between tenants
            )
        except WorkflowAlreadyStartedError:
            pass  # a retried request: the run started the first time
        except RPCError as err:
            raise from_temporal(
                err, doing="start the run", namespace=self._parts.namespace, retry=TEMPORAL_DOWN
            ) from err

    async def _submit(self, run: RunInput, on_busy: OnBusy) -> SubmitOutcome:
        """Hand the run to its session's workflow, which runs one at a time."""
        assert run.session_id is not None
        parts = self._parts
        try:
            for _ in range(2):  # the second time on our queue, if it ran on another
                handle = await parts.temporal.start_workflow(
                    SessionWorkflow.run,
                    SessionState(session_id=run.session_id, tenant_id=run.tenant_id),
                    id=session_workflow_id(run.session_id),
                    task_queue=parts.settings.task_queue,
                    id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                    rpc_timeout=TEMPORAL_CALL_TIMEOUT,
                    priority=tenant_priority(run.tenant_id),  # its runs inherit it
                )
                if await on_our_queue(
                    parts, handle, run.session_id, run.run_id, tenant_id=run.tenant_id
                ):
                    break
            # The busy check was Postgres's; the session workflow queues the rest in order.
            return await handle.execute_update(
                SessionWorkflow.submit,
                SessionSubmission(run=run, on_busy="enqueue" if on_busy == "reject" else on_busy),
                rpc_timeout=SUBMIT_WAIT,
            )
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            kind = cause.type if isinstance(cause, ApplicationError) else None
            if kind == "DuplicateRun":
                return SubmitOutcome(run_id=run.run_id, position=0)  # a retry: it is there
            if kind == "SessionBusy":
                raise Conflict(str(cause)) from err
            raise
        except RPCError as err:
            raise from_temporal(
                err, doing="queue the message", namespace=self._parts.namespace, retry=SESSION_DOWN
            ) from err
        except WorkflowUpdateRPCTimeoutOrCancelledError as err:
            raise Unavailable(SESSION_DOWN, retry_after_s=RETRY_AFTER_S) from err

    # -- reading ------------------------------------------------------------

    async def live(self, record: RunRecord) -> RunPublic:
        """The run as clients see it, with its tree and the tree's usage; a live run that
        waits on a person reads as `waiting` (`RunLiveState.live`)."""
        return await self._live.live(record)

    async def pending(self, record: RunRecord) -> list[InteractionPublic]:
        """What the run's tree waits on now, as its tenant sees it; every surface asks this."""
        return await self._live.pending(record)

    async def get(self, run_id: str, user: Principal, *, allow_admin: bool = True) -> RunRecord:
        """The run, if the caller's tenant owns it (admins may read any); 404 otherwise,
        audited."""
        parts = self._parts
        record = await self.ids.run(known_id(run_id, "run"), user)
        if record is None:
            raise NotFound(f"No run {run_id}.")
        if record.tenant_id != user.tenant_id and not (allow_admin and user.is_admin):
            own = await self.ids.starting_run(run_id, user)
            if isinstance(own, RunRecord):
                return own
            if own:  # the caller's own, not another tenant's: nothing to audit
                raise NotFound(f"Run {run_id} is starting; ask again in a moment.")
            await parts.audit.cross_tenant(user, "run", run_id)
            raise NotFound(f"No run {run_id}.")
        return record

    async def page(
        self,
        user: Principal,
        *,
        limit: int,
        before: tuple[object, str] | None = None,
        **filters: object,
    ) -> list[RunRecord]:
        for name, value in [*filters.items(), ("run_id", before[1] if before else None)]:
            if isinstance(value, str):
                known_id(value, name.removesuffix("_id"))
        if isinstance(filters.get("session_id"), str):
            session = await self.ids.session(str(filters["session_id"]), user)
            if session is not None and session.tenant_id == user.tenant_id:
                filters["session_id"] = session.id
        if isinstance(filters.get("schedule_id"), str):
            # A schedule kept under the caller's scoped key started its runs under it.
            mine = {**filters, "schedule_id": scoped(user.tenant_id, str(filters["schedule_id"]))}
            runs = await self._parts.store.list_runs(
                tenant_id=user.tenant_id,
                limit=limit,
                before=before,  # type: ignore[arg-type]
                **mine,  # type: ignore[arg-type]
            )
            if runs:
                return runs
        return await self._parts.store.list_runs(
            tenant_id=user.tenant_id,
            limit=limit,
            before=before,  # type: ignore[arg-type]
            **filters,  # type: ignore[arg-type]
        )

    async def events(
        self, run_id: str, user: Principal, *, after: int, limit: int
    ) -> list[EventRecord]:
        record = await self.get(run_id, user)
        return await self._parts.store.list_events(record.id, after=after, limit=limit)

    async def interactions(self, run_id: str, user: Principal) -> list[InteractionPublic]:
        """The run's interactions, then its sub-agents' (each names its own run)."""
        record = await self.get(run_id, user)
        return await tree_interactions(self._parts.store, self._parts.interactions, record)

    async def interaction(
        self, run_id: str, interaction_id: str, user: Principal
    ) -> InteractionPublic:
        record = await self.get(run_id, user)
        owner = record.id
        key = interaction_key(record, known_id(interaction_id, "interaction"))
        ia = await self._parts.interactions.get(owner, key)
        if ia is None:
            child = await child_owning(self._parts.store, record, key)
            if child is not None:
                owner, ia = child, await self._parts.interactions.get(child, key)
        if ia is None:
            raise NotFound(f"No interaction {interaction_id} in run {run_id}.")
        return InteractionPublic.from_interaction(owner, ia, tenant_id=record.tenant_id)

    # -- cancelling ---------------------------------------------------------

    async def cancel(self, run_id: str, user: Principal) -> RunRecord:
        """Cancel a run: a queued one leaves its session's queue, a live one is cancelled.
        Answers with the run as it is now (a live one finishes cancelling shortly)."""
        parts = self._parts
        record = await self.get(run_id, user, allow_admin=False)
        shown, run_id = run_id, record.id
        if record.status in FINISHED:
            raise Conflict(f"Run {shown} has already {record.status}.")
        if record.status == "queued" and record.session_id is not None:
            session = parts.temporal.get_workflow_handle_for(
                SessionWorkflow.run, session_workflow_id(record.session_id)
            )
            try:
                outcome: WithdrawOutcome = await session.execute_update(
                    SessionWorkflow.withdraw,
                    Withdrawal(run_id=run_id),
                    rpc_timeout=TEMPORAL_CALL_TIMEOUT,
                )
            except (RPCError, WorkflowUpdateRPCTimeoutOrCancelledError):
                outcome = WithdrawOutcome(run_id=run_id, was="unknown")  # no session workflow
            if outcome.was != "unknown":
                return await self._reloaded(run_id)
        try:
            await parts.temporal.get_workflow_handle_for(AgentRunWorkflow.run, run_id).cancel(
                rpc_timeout=TEMPORAL_CALL_TIMEOUT
            )
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND or namespace_missing(err):
                raise from_temporal(
                    err, doing=f"cancel run {shown}", namespace=self._parts.namespace
                ) from err
            raise Conflict(f"Run {shown} can no longer be cancelled.") from err
        return await self._reloaded(run_id)

    async def _reloaded(self, run_id: str) -> RunRecord:
        record = await self._parts.store.get_run(run_id)
        assert record is not None
        return record
