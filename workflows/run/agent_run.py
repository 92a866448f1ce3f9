"""`AgentRunWorkflow`: one agent run, from the user's input to the final report.

The loop: call the model; if it answers, finish; otherwise pass each tool call
through the gate, run the allowed ones as activities, fold the results into the
convergence state, and call the model again. Transcripts and tool outputs live
in Postgres; this history carries only references and digests.
"""

from __future__ import annotations

import asyncio
import dataclasses

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, FailureError

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import RunRecords
    from keel.workflows.gate.gate import GateDecision, ToolGate
    from keel.workflows.gate.grants import GrantChange, apply_change, rules_with_grants
    from keel.workflows.gate.mcp_tools import McpToolset
    from keel.workflows.gate.models import GateResult, MessageRef
    from keel.workflows.gate.permissions import PermissionRule
    from keel.workflows.gate.plugin_refs import PluginToolset, hook_denial
    from keel.workflows.interactions.models import DecisionOutcome, Interaction, InteractionDecision
    from keel.workflows.router.workflow import RunRouter
    from keel.workflows.run import (
        agent_roles_run,
        convergence,
        coverage,
        quota_run,
        run_memory,
        subagents,
    )
    from keel.workflows.run.hooks import RunHooks
    from keel.workflows.run.interactions import RunAborted, RunInteractions
    from keel.workflows.run.interactions import is_task as _is_task
    from keel.workflows.run.model_steps import RunModelSteps
    from keel.workflows.run.models import (
        FinishRunInput,
        RunInput,
        RunProgress,
        RunResult,
        RunState,
        RunStatus,
        StartRunInput,
        StopReason,
    )
    from keel.workflows.run.notices import RunNotices
    from keel.workflows.run.secret_asks import RunSecrets
    from keel.workflows.run.step_models import LlmStepResult, ToolDigest
    from keel.workflows.run.subagent_models import ChildRunNotice
    from keel.workflows.run.subagent_runs import RunSubagents
    from keel.workflows.run.tool_calls import RunToolCalls, rule_text

# Ordinals of messages within a step: a nudge, the assistant, then tool results.
NUDGE_ORD = 0
ASSISTANT_ORD = 1
FIRST_TOOL_ORD = 2


@workflow.defn(name="AgentRunWorkflow")
class AgentRunWorkflow:
    @workflow.init
    def __init__(self, run: RunInput) -> None:
        self._state = RunState()
        self._status: RunStatus = "running"
        self._stop_reason: StopReason | None = None
        self._opening: StartRunInput | None = None
        # The run's record keys, for handlers that may run before `run` does.
        self._ids = run.model_copy(update={"run_id": run.run_id or workflow.info().workflow_id})
        self._gate: ToolGate | None = None
        self._model = RunModelSteps(self, run)
        self._hooks = RunHooks(self)
        self._notices = RunNotices(self)
        self._subagents = RunSubagents(self, AgentRunWorkflow.run, AgentRunWorkflow.child_status)
        self._tools = RunToolCalls(self, self._hooks)
        self._interactions = RunInteractions(
            self, self._hooks, self._notices, self._subagents, self._tools
        )
        self._secrets = RunSecrets(self, self._interactions, self._notices, self._subagents)
        self._tools.secrets = self._secrets  # a plugin tool's secret, asked for first
        self._router = RunRouter(self, self._subagents, self._interactions, self._notices)

    @workflow.query(name="progress")
    def progress(self) -> RunProgress:
        return RunProgress(
            status=self._status,
            step=self._state.step,
            tool_calls=self._state.tool_calls,
            usage=self._state.usage,
            stop_reason=self._stop_reason,
            pending_interactions=[
                *(i.id for i in self._state.interactions.values() if i.status == "pending"),
                *subagents.pending_of_children(self._state),
            ],
        )

    @workflow.run
    async def run(self, run: RunInput) -> RunResult:
        parent = workflow.info().parent
        if run.task is not None and run.parent_run_id is None and parent is not None:
            # A sub-agent's ids follow from its parent's call, which its history records.
            run = run.model_copy(
                update={
                    "parent_run_id": parent.workflow_id,
                    "run_id": subagents.task_run_id(parent.workflow_id, run.task),
                }
            )
        if not run.run_id:
            # A schedule picks the workflow id when it fires, so the input cannot carry it.
            run = run.model_copy(update={"run_id": workflow.info().workflow_id})
        try:
            if run.state is not None:
                self._state = run.state
            else:
                if run.task is not None:
                    run = await self._subagents.open(run)
                self._state.session_rules = list(run.session_rules)
                if run.grants:  # a `grants_changed` signal may have come first
                    apply_change(
                        self._state.grants,
                        self._state.revoked_grants,
                        GrantChange(added=run.grants),
                    )
                await self._start(run)
                if run.acting_roles is not None:  # a schedule's run: its creator's roles
                    refusal = await agent_roles_run.refusal(run)
                    if refusal is not None:
                        await self._record_opening()  # the first model call never comes
                        return await self._finish(run, "failed", "error", error=refusal)
                over_quota = await quota_run.schedule_refusal(run)
                if over_quota is not None:  # a schedule fires through Temporal, not the API
                    await self._record_opening()
                    return await self._finish(run, "failed", "budget", error=over_quota)
                if run.route is not None:  # `agent: "auto"`: pick the agent, run it as a child
                    return await self._router.route(run)
                if run.agent.mcp_servers:
                    await self._discover_mcp_tools(run)
                if run_memory.remembers(run):
                    await self._recall(run)
                if coverage.covers_files(run):  # Keel plans the reading, then the model reports
                    await self._record_opening()
                    await coverage.CoverageDriver(self._state, self._take_seqs).drive(run)
            return await self._loop(run)
        except FailureError as err:
            # A regular activity fails with an ActivityError around the cause; a local
            # one with the cause itself.
            cause = err.cause if isinstance(err, ActivityError) else err
            if isinstance(cause, CancelledError):
                # The run was cancelled while an activity was in flight.
                await self._finish(run, "cancelled", "cancelled")
                raise asyncio.CancelledError() from err
            reason = _failure_reason(err)
            await self._finish(run, "failed", "error", error=reason)
            raise ApplicationError(f"Run failed: {reason}", non_retryable=True) from err
        except RunAborted as err:
            await self._finish(run, "failed", "approval_expired", error=str(err))
            raise ApplicationError(f"Run failed: {err}", non_retryable=True) from err
        except asyncio.CancelledError:
            await self._finish(run, "cancelled", "cancelled")
            raise

    async def _loop(self, run: RunInput) -> RunResult:
        state = self._state
        limits = run.agent.limits
        gate = ToolGate(
            run.agent.tools,
            run.agent.permissions,
            McpToolset(
                servers=tuple(run.agent.mcp_servers),
                discovered=tuple(state.mcp_tools),
                unavailable=tuple(state.mcp_unavailable),
            ),
            subagents=run.agent.subagents if run.depth < subagents.MAX_SUBAGENT_DEPTH else [],
            plugins=PluginToolset(tuple(run.agent.plugin_tools)),
        )
        self._gate = gate
        while True:
            plan = convergence.plan_next_call(state, limits)
            if plan.nudge is not None and plan.force_reason is None:
                state.nudged = True
            state.step += 1
            result = await self._model.step(run, gate, plan)
            if plan.force_reason is not None or not result.tool_calls:
                reason: StopReason = plan.force_reason or "final_answer"
                return await self._finish(run, "completed", reason, final_step=state.step)
            await self._tool_round(run, gate, result)
            over_quota = quota_run.stop_after(result)
            if over_quota is not None:  # the tenant's quota: this step was the last
                return await self._finish(
                    run, "completed", "budget", error=over_quota, final_step=state.step
                )
            if self._should_continue_as_new():
                # A sub-agent's last notice may still be on its way to the store.
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(run.model_copy(update={"state": state}))

    async def _start(self, run: RunInput) -> None:
        opening = StartRunInput(
            run_id=run.run_id,
            agent=run.agent.name,
            system_prompt=run.agent.system_prompt,
            input=run.input,
            texts_key=run.texts_key,
            model=run.model,
            workspace=run.workspace,
            tenant_id=run.tenant_id,
            requester=run.requester,
            trigger=run.trigger,
            session_id=run.session_id,
            parent_run_id=run.parent_run_id,
            event_seq=self._take_seqs(1),
            schedule_id=run.schedule_id,
        )
        if self._model.fast_start:
            # The first model call, a local one, records it: one marker less. (A regular
            # call's input is in the history, so it would carry all of this again.)
            self._opening = opening
            return
        await run_activity(RunRecords.start_run, opening, timeouts.STORE_CALL, local=True)

    async def _record_opening(self) -> None:
        """Record the run now if a fast start left that to a model call that is not coming."""
        if self._opening is not None:
            await run_activity(RunRecords.start_run, self._opening, timeouts.STORE_CALL, local=True)
            self._opening = None

    async def _recall(self, run: RunInput) -> None:
        """The user's memories, as a note the first model call sends (`run_memory`)."""
        seq = self._take_seqs(1)
        if await run_memory.recall(run, self._opening, seq):
            self._opening = None  # the recall opened the run's record
        elif self._state.next_seq == seq + 1:
            self._state.next_seq = seq  # no event was written: leave no gap in the stream

    async def _discover_mcp_tools(self, run: RunInput) -> None:
        """List the agent's MCP servers' tools; only their names enter the history.

        Their descriptions and schemas are stored in Postgres for the model calls. A
        server that stays down is left out, and the gate says so if the model calls it.
        """
        found = await self._secrets.discover(run)  # as the run's user
        self._state.mcp_tools = list(found.tools)
        self._state.mcp_unavailable = list(found.unavailable)

    async def _tool_round(self, run: RunInput, gate: ToolGate, result: LlmStepResult) -> None:
        state = self._state
        step = state.step
        decisions: list[tuple[int, GateDecision]] = []
        answered_now: dict[str, MessageRef] = {}
        for index, call in enumerate(result.tool_calls):
            ord_ = FIRST_TOOL_ORD + index
            decision = gate.check(call, {**state.answered, **answered_now}, self.rules())
            if decision.verdict in ("run", "ask"):
                answered_now[decision.fingerprint] = MessageRef(step=step, ord=ord_)
            decisions.append((ord_, decision))
        state.tool_calls += len(decisions)
        decisions = await self._hooks.before(run, decisions)
        on_client = [*run.local_tools, *run.agent.client_tools]
        if on_client:
            decisions = [(o, _on_client(d, on_client)) for o, d in decisions]

        asks = [(o, d) for o, d in decisions if d.verdict == "ask"]
        interactions = await self._interactions.open(run, asks)
        runnable = [(o, d) for o, d in decisions if d.verdict == "run" and not _is_task(d)]
        tasks = [(o, d) for o, d in decisions if d.verdict == "run" and _is_task(d)]
        parallel = [(o, d) for o, d in runnable if d.spec is not None and d.spec.read_only]
        serial = [(o, d) for o, d in runnable if not (d.spec is not None and d.spec.read_only)]
        outcomes: dict[int, ToolDigest | GateResult] = {}

        async def run_one(ord_: int, decision: GateDecision) -> None:
            outcomes[ord_] = await self._tools.run(run, ord_, decision)

        async def run_serial() -> None:
            for o, d in serial:
                await run_one(o, d)

        async def settle(ord_: int, decision: GateDecision, interaction: Interaction) -> None:
            outcomes[ord_] = await self._interactions.settle(run, ord_, decision, interaction)

        async def run_tasks() -> None:
            if tasks:
                outcomes.update(await self._subagents.run_all(run, tasks))

        await asyncio.gather(
            *(run_one(o, d) for o, d in parallel),
            run_serial(),
            run_tasks(),
            *(settle(o, d, i) for (o, d), i in zip(asks, interactions, strict=True)),
        )

        fresh = False
        failures: list[bool] = []
        for ord_, decision in decisions:
            outcome = outcomes.get(ord_)
            if isinstance(outcome, ToolDigest):
                fresh = fresh or not outcome.stale
                failures.append(outcome.is_error)
                continue
            if outcome is not None and outcome.child_run_id is not None:
                # A sub-agent's answer is news, unless it failed.
                fresh = fresh or not outcome.is_error
                state.pending_results.append(outcome)
                failures.append(outcome.is_error)
                continue
            if outcome is None:
                outcome = GateResult(
                    step=step,
                    ord=ord_,
                    call_id=decision.call.call_id,
                    name=decision.call.name,
                    arguments=decision.call.arguments,
                    content=decision.message or None,
                    copy_of=decision.copy_of,
                    event_seq=self._take_seqs(2),
                    denied_by=(
                        hook_denial(decision.hook)
                        if decision.hook
                        else rule_text(decision, acting_only=False)
                    )
                    if decision.verdict == "deny"
                    else None,
                )
            state.pending_results.append(outcome)
            # A call that was to run but has a gate's answer: a hook failed around it.
            failures.append(
                decision.verdict in ("error", "deny")
                or (decision.verdict == "run" and outcome.is_error)
            )
        for fingerprint, ref in answered_now.items():
            if self._interactions.answer_is_final(ref):
                state.answered[fingerprint] = ref
        convergence.record_round(state, failures, fresh=fresh)

    # -- interactions: `RunInteractions` holds the logic ------------------------

    @workflow.update  # named after the method; bare, so a reference to it types its result
    async def decide(self, decision: InteractionDecision) -> DecisionOutcome:
        return await self._interactions.decide(decision)

    @decide.validator
    def _validate_decision(self, decision: InteractionDecision) -> None:
        self._interactions.validate(decision)

    @workflow.signal(name="resolve_interaction")
    async def resolve_interaction(self, decision: InteractionDecision) -> None:
        await self._interactions.resolve(decision)

    @workflow.signal(name="grants_changed")
    def grants_changed(self, change: GrantChange) -> None:
        """Grants made or revoked elsewhere that cover this run: the next call sees them."""
        apply_change(self._state.grants, self._state.revoked_grants, change)

    def rules(self) -> list[PermissionRule]:
        """The gate's last layer: the session's rules, then the live grants."""
        state = self._state
        if not state.grants:
            return state.session_rules
        agent_rules = self._gate.agent_rules if self._gate is not None else []
        return rules_with_grants(state.session_rules, state.grants, workflow.now(), agent_rules)

    @workflow.query(name="interactions")
    def list_interactions(self) -> list[Interaction]:
        return list(self._state.interactions.values())

    @workflow.signal(name="child_status")
    async def child_status(self, notice: ChildRunNotice) -> None:
        """A sub-agent waits on a person, or no longer: its parent's stream says so."""
        await self._subagents.child_status(notice)

    async def _finish(
        self,
        run: RunInput,
        status: RunStatus,
        reason: StopReason,
        *,
        error: str | None = None,
        final_step: int | None = None,
    ) -> RunResult:
        state = self._state
        if status == "completed" and run_memory.remembers(run):
            state.usage = state.usage.plus(await run_memory.remember(run))
        covered = None
        if state.coverage is not None and status == "completed":
            covered = await coverage.CoverageDriver(state, self._take_seqs).close(run, reason)
            covered = covered.model_copy(update={"unread": []})  # the run's record lists them
            if (
                covered.status == "partial"
                and reason == "final_answer"
                and state.coverage.stopped_by
            ):
                reason = state.coverage.stopped_by  # the limit that left files unread
        finished = await run_activity(
            RunRecords.finish_run,
            FinishRunInput(
                run_id=run.run_id,
                status=status,
                stop_reason=reason,
                error=error,
                final_step=final_step,
                steps=state.step,
                tool_calls=state.tool_calls,
                usage=state.usage,
                event_seq=self._take_seqs(1),
                # Only a webhook notice needs the report's first characters.
                preview=bool(run.webhook_url or run.push_notifications),
            ),
            timeouts.STORE_CALL,
            local=True,
            summary=f"finish {status}",
        )
        await self._hooks.run_end(run, status, reason, error)
        # Terminal only once Postgres has the outcome, so readers never see it early.
        self._status = status
        self._stop_reason = reason
        await self._notices.notify(
            run,
            status,
            stop_reason=reason,
            error=error,
            report_preview=finished.report_preview,
        )
        return RunResult(
            run_id=run.run_id,
            status=status,
            stop_reason=reason,
            steps=state.step,
            tool_calls=state.tool_calls,
            usage=state.usage,
            report_preview=finished.report_preview,
            error=error,
            coverage=covered,
        )

    def _take_seqs(self, count: int) -> int:
        first = self._state.next_seq
        self._state.next_seq += count
        return first

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > timeouts.MAX_HISTORY_EVENTS
        )


def _on_client(decision: GateDecision, local_tools: list[str]) -> GateDecision:
    """A read the rules let run, of a tool the client runs: it asks the client instead."""
    spec = decision.spec
    if decision.verdict != "run" or decision.call.name not in local_tools:
        return decision
    if spec is None or not spec.read_only or spec.group != "read":
        return decision
    return dataclasses.replace(decision, verdict="ask", local=True)


def _failure_reason(err: FailureError) -> str:
    if isinstance(err, ActivityError):
        cause = err.cause
        message = str(cause) if cause is not None else str(err)
        return f"{err.activity_type or 'activity'} failed: {message}"
    return f"a step failed: {err}"
