"""`AgentRunWorkflow`: one agent run, from the user's input to the final report.

The loop: call the model; if it answers, finish; otherwise pass each tool call
through the gate, run the allowed ones as activities, fold the results into the
convergence state, and call the model again. Transcripts and tool outputs live
in Postgres; this history carries only references and digests.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows import convergence, timeouts
    from workflows.gate import GateDecision, ToolGate
    from workflows.models import (
        FinishRunInput,
        FinishRunResult,
        GateResult,
        LlmStepInput,
        LlmStepResult,
        MessageRef,
        RunInput,
        RunProgress,
        RunResult,
        RunState,
        RunStatus,
        StartRunInput,
        StopReason,
        ToolCallInput,
        ToolDigest,
    )

# Ordinals of messages within a step: a nudge, the assistant, then tool results.
NUDGE_ORD = 0
ASSISTANT_ORD = 1
FIRST_TOOL_ORD = 2


@workflow.defn(name="AgentRunWorkflow")
class AgentRunWorkflow:
    def __init__(self) -> None:
        self._state = RunState()
        self._status: RunStatus = "running"
        self._stop_reason: StopReason | None = None

    @workflow.query(name="progress")
    def progress(self) -> RunProgress:
        return RunProgress(
            status=self._status,
            step=self._state.step,
            tool_calls=self._state.tool_calls,
            usage=self._state.usage,
            stop_reason=self._stop_reason,
        )

    @workflow.run
    async def run(self, run: RunInput) -> RunResult:
        if run.state is not None:
            self._state = run.state
        else:
            await self._start(run)
        try:
            return await self._loop(run)
        except ActivityError as err:
            reason = _failure_reason(err)
            await self._finish(run, "failed", "error", error=reason)
            raise ApplicationError(f"Run failed: {reason}", non_retryable=True) from err
        except asyncio.CancelledError:
            await self._finish(run, "cancelled", "cancelled")
            raise

    async def _loop(self, run: RunInput) -> RunResult:
        state = self._state
        limits = run.agent.limits
        gate = ToolGate(run.agent.tools)
        while True:
            plan = convergence.plan_next_call(state, limits)
            if plan.nudge is not None and plan.force_reason is None:
                state.nudged = True
            state.step += 1
            result = await self._llm_step(run, gate, plan)
            if plan.force_reason is not None or not result.tool_calls:
                reason: StopReason = plan.force_reason or "final_answer"
                return await self._finish(run, "completed", reason, final_step=state.step)
            await self._tool_round(run, gate, result)
            if self._should_continue_as_new():
                workflow.continue_as_new(run.model_copy(update={"state": state}))

    async def _start(self, run: RunInput) -> None:
        await workflow.execute_activity(
            "start_run",
            StartRunInput(
                run_id=run.run_id,
                agent=run.agent.name,
                system_prompt=run.agent.system_prompt,
                input=run.input,
                model=run.model,
                workspace=run.workspace,
                tenant_id=run.tenant_id,
                requester=run.requester,
                trigger=run.trigger,
                session_id=run.session_id,
                parent_run_id=run.parent_run_id,
                event_seq=self._take_seqs(1),
            ),
            start_to_close_timeout=timeouts.STORE_START_TO_CLOSE,
            retry_policy=timeouts.STORE_RETRY,
        )

    async def _llm_step(
        self, run: RunInput, gate: ToolGate, plan: convergence.NextCall
    ) -> LlmStepResult:
        state = self._state
        step_input = LlmStepInput(
            run_id=run.run_id,
            session_id=run.session_id,
            step=state.step,
            model=run.model,
            tools=gate.tool_names,
            tool_choice="auto" if plan.tools_allowed else "none",
            nudge=plan.nudge,
            gate_results=state.pending_results,
            event_seq=self._take_seqs(2),
        )
        result: LlmStepResult = await workflow.execute_activity(
            "llm_step",
            step_input,
            result_type=LlmStepResult,
            start_to_close_timeout=timeouts.LLM_START_TO_CLOSE,
            heartbeat_timeout=timeouts.LLM_HEARTBEAT,
            retry_policy=timeouts.llm_retry(run.llm_max_attempts),
        )
        state.pending_results = []
        state.usage = state.usage.plus(result.usage)
        return result

    async def _tool_round(self, run: RunInput, gate: ToolGate, result: LlmStepResult) -> None:
        state = self._state
        step = state.step
        decisions: list[tuple[int, GateDecision]] = []
        answered_now: dict[str, MessageRef] = {}
        for index, call in enumerate(result.tool_calls):
            ord_ = FIRST_TOOL_ORD + index
            decision = gate.check(call, {**state.answered, **answered_now})
            if decision.verdict == "run":
                answered_now[decision.fingerprint] = MessageRef(step=step, ord=ord_)
            decisions.append((ord_, decision))
        state.tool_calls += len(decisions)

        runnable = [(o, d) for o, d in decisions if d.verdict == "run"]
        parallel = [(o, d) for o, d in runnable if d.spec is not None and d.spec.read_only]
        serial = [(o, d) for o, d in runnable if not (d.spec is not None and d.spec.read_only)]
        digests: dict[int, ToolDigest] = {}
        if parallel:
            outputs = await asyncio.gather(*(self._run_tool(run, o, d) for o, d in parallel))
            digests.update({o: out for (o, _), out in zip(parallel, outputs, strict=True)})
        for o, d in serial:
            digests[o] = await self._run_tool(run, o, d)

        found: list[str] = []
        failures: list[bool] = []
        for ord_, decision in decisions:
            digest = digests.get(ord_)
            if digest is not None:
                found.extend(digest.seen)
                found.append(f"sha:{digest.sha256[:16]}")
                failures.append(digest.is_error)
                continue
            state.pending_results.append(
                GateResult(
                    step=step,
                    ord=ord_,
                    call_id=decision.call.call_id,
                    name=decision.call.name,
                    arguments=decision.call.arguments,
                    content=decision.message or None,
                    copy_of=decision.copy_of,
                    event_seq=self._take_seqs(2),
                )
            )
            failures.append(decision.verdict == "error")
        state.answered.update(answered_now)
        convergence.record_round(state, found, failures)

    async def _run_tool(self, run: RunInput, ord_: int, decision: GateDecision) -> ToolDigest:
        return await workflow.execute_activity(
            "run_tool",
            ToolCallInput(
                run_id=run.run_id,
                step=self._state.step,
                ord=ord_,
                call_id=decision.call.call_id,
                name=decision.call.name,
                arguments=decision.canonical_arguments,
                workspace=run.workspace,
                event_seq=self._take_seqs(2),
            ),
            result_type=ToolDigest,
            start_to_close_timeout=timeouts.TOOL_START_TO_CLOSE,
            retry_policy=timeouts.TOOL_RETRY,
        )

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
        finished: FinishRunResult = await workflow.execute_activity(
            "finish_run",
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
            ),
            result_type=FinishRunResult,
            start_to_close_timeout=timeouts.STORE_START_TO_CLOSE,
            retry_policy=timeouts.STORE_RETRY,
        )
        # Terminal only once Postgres has the outcome, so readers never see it early.
        self._status = status
        self._stop_reason = reason
        return RunResult(
            run_id=run.run_id,
            status=status,
            stop_reason=reason,
            steps=state.step,
            tool_calls=state.tool_calls,
            usage=state.usage,
            report_preview=finished.report_preview,
            error=error,
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


def _failure_reason(err: ActivityError) -> str:
    cause = err.cause
    message = str(cause) if cause is not None else str(err)
    return f"{err.activity_type or 'activity'} failed: {message}"
