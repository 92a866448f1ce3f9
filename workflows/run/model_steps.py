"""The run's model step: one call to the model, compacting the conversation first when
it does not fit.

`RunModelSteps` makes a step's `llm_step` call (from `llm_step_input`, the one place
that input is built), and when the activity answers that the conversation is over
budget, compacts it (`compaction_input`) and calls again. It decides from the run's
input and the recorded latencies whether a call runs local (one marker) or regular,
and waits out a Postgres outage without spending the provider's attempts
(`outlasting_outages`, which the router's classification uses too). `AgentRunWorkflow`
composes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import ContextCompaction, LlmCalls
    from keel.workflows.context.models import CompactionInput, CompactionNeed
    from keel.workflows.gate.gate import ToolGate
    from keel.workflows.run import budget, model_fallback
    from keel.workflows.run.convergence import NextCall
    from keel.workflows.run.models import RunInput, RunState, StartRunInput
    from keel.workflows.run.step_models import LlmStepInput, LlmStepResult
    from keel.workflows.usage.models import Usage

__all__ = [
    "ModelStepHost",
    "RunModelSteps",
    "compaction_input",
    "llm_step_input",
    "outlasting_outages",
]

T = TypeVar("T")


class ModelStepHost(Protocol):
    """What the agent run offers its model steps."""

    _state: RunState
    _opening: StartRunInput | None
    """The run's record, while a fast start leaves it to the first model call."""

    def _take_seqs(self, count: int) -> int: ...


def llm_step_input(
    run: RunInput,
    state: RunState,
    gate: ToolGate,
    plan: NextCall,
    *,
    event_seq: int,
    start: StartRunInput | None,
    wait_seq: int | None = None,
) -> LlmStepInput:
    """The input of this step's model call: the tools the gate offers, as `plan` allows."""
    return LlmStepInput(
        run_id=run.run_id,
        tenant_id=run.tenant_id,
        session_id=run.session_id,
        step=state.step,
        model=run.model,
        tools=gate.tool_names,
        tool_choice="auto" if plan.tools_allowed else "none",
        nudge=plan.nudge,
        gate_results=state.pending_results,
        event_seq=event_seq,
        start=start,
        mcp=bool(gate.mcp_tool_names),
        context_window=run.agent.context_window,
        plugin_tools=gate.plugin_tool_names,
        wait_seq=wait_seq,
    )


def after_compaction(step: LlmStepInput) -> LlmStepInput:
    """The same call again once compacted: what it was to add is in the summary now."""
    return step.model_copy(update={"gate_results": [], "start": None, "nudge": None})


def compaction_input(
    run: RunInput, step: LlmStepInput, need: CompactionNeed, *, event_seq: int
) -> CompactionInput:
    """The input of the compaction `step`'s call asked for, with the tools it offers."""
    return CompactionInput(
        run_id=run.run_id,
        session_id=run.session_id,
        step=step.step,
        # The step's model: after a move, the fallback's window and price, not the first's.
        model=step.model,
        tools=step.tools,
        need=need,
        event_seq=event_seq,
        context_window=run.agent.context_window,
    )


async def outlasting_outages(call: Callable[[], Awaitable[T]]) -> T:
    """`call()`, again after a durable pause while Postgres is away, for a while.

    For a model call, whose retry policy counts the provider's failures: a store
    outage fails it at once (`StoreUnavailable` is not retried there) and costs none.
    """
    deadline = workflow.now() + timeouts.STORE_OUTAGE_BUDGET
    delay = timeouts.STORE_OUTAGE_FIRST_DELAY
    while True:
        try:
            return await call()
        except FailureError as err:
            cause = err.cause if isinstance(err, ActivityError) else err
            outage = (
                isinstance(cause, ApplicationError) and cause.type == timeouts.STORE_UNAVAILABLE
            )
            if not outage or workflow.now() + delay > deadline:
                raise
        workflow.logger.warning("Postgres is unavailable; calling again in %s", delay)
        await workflow.sleep(delay)
        delay = min(delay * 2, timeouts.STORE_OUTAGE_MAX_DELAY)


class RunModelSteps:
    """Calls the model once a step, compacting first when the conversation must shrink."""

    def __init__(self, host: ModelStepHost, run: RunInput) -> None:
        self._host = host
        self.fast_start = run.fast_model
        """The starter saw the model's latest calls all fast: the first call runs local."""
        self._local_below_ms = run.llm_local_below_ms
        self._local_budget_ms = run.llm_local_budget_ms

    async def step(self, run: RunInput, gate: ToolGate, plan: NextCall) -> LlmStepResult:
        """This step's model call; the results the gate holds for it are sent with it."""
        host = self._host
        state = host._state
        # Under a provider's limit a call may wait: its event gets the number before the
        # message's, so the events read in the order things happened.
        waits = self._limit_waits(run)
        seq = host._take_seqs(3 if waits else 2)
        step_input = llm_step_input(
            run,
            state,
            gate,
            plan,
            event_seq=seq + 1 if waits else seq,
            start=host._opening,
            wait_seq=seq if waits else None,
        )
        host._opening = None
        result = await self._call(run, step_input)
        while result.compact is not None:
            # The activity decided the conversation does not fit: summarise, call again.
            await self._compact(run, step_input, result.compact)
            step_input = after_compaction(step_input)
            result = await self._call(run, step_input)
        state.pending_results = []
        return result

    async def _compact(self, run: RunInput, step: LlmStepInput, need: CompactionNeed) -> None:
        state = self._host._state
        job = compaction_input(run, step, need, event_seq=self._host._take_seqs(1))
        # A fast model summarises quickly too: one marker, no round trip. A crash repeats
        # nothing: the activity answers from the stored summary.
        done = await run_activity(
            ContextCompaction.compact_context,
            job,
            timeouts.compaction_call(run.llm_max_attempts),
            local=self.runs_local(),
        )
        state.compactions += 1
        if done.tokens:
            prompt, completion = done.tokens
            state.usage = state.usage.plus(
                Usage(prompt_tokens=prompt, completion_tokens=completion, cost_usd=done.cost_usd)
            )

    @staticmethod
    def _limit_waits(run: RunInput) -> bool:
        return run.provider_limits and workflow.patched(model_fallback.LIMIT_WAITS_PATCH)

    async def _call(self, run: RunInput, step_input: LlmStepInput) -> LlmStepResult:
        """The step's call, by the next model of the run's list while one fails it."""
        if not run.fallback_models or not workflow.patched(model_fallback.FALLBACK_PATCH):
            return await self._call_model(run, step_input, run.llm_max_attempts)
        while True:
            attempts = model_fallback.attempts_for(run, step_input.model)
            try:
                return await self._call_model(run, step_input, attempts)
            except FailureError as err:
                after = model_fallback.next_model(run, step_input.model)
                why = model_fallback.reason_to_move(err)
                if after is None or why is None:
                    raise
                waits = self._limit_waits(run)
                workflow.logger.warning(
                    "step %s: %s failed (%s); %s takes it",
                    self._host._state.step,
                    step_input.model,
                    why[0],
                    after,
                )
                seq = self._host._take_seqs(4 if waits else 3)
                step_input = model_fallback.moved(step_input, after, why, seq, waits=waits)

    async def _call_model(
        self, run: RunInput, step_input: LlmStepInput, attempts: int
    ) -> LlmStepResult:
        state = self._host._state
        local = self.runs_local()
        result = await outlasting_outages(
            lambda: run_activity(
                LlmCalls.llm_step,
                step_input,
                timeouts.llm_call(attempts),
                local=local,
                # Regular calls only: a summary costs ~50 B of history, and fast steps (local,
                # one marker each) are the ones that must stay small.
                summary=None if local else f"model call {state.step} · {step_input.model}",
            )
        )
        if local:
            state.local_llm_ms += result.latency_ms
        else:
            state.local_llm_ms = 0
        if result.compact is None:
            state.last_llm_ms = result.latency_ms
            budget.note_call(state, run.agent.limits, result.spent())
        state.usage = state.usage.plus(result.spent())
        return result

    def runs_local(self) -> bool:
        """A fast model's next call runs as a local activity, a slow one's as a regular one.

        A regular activity's completion is recorded before the next step starts. A local
        one's is recorded when the workflow task ends, so a crash can lose a finished
        call's result; the activity then answers from the message it stored, and the
        model is not called twice. Local calls run back to back only while the model
        stays fast (under `RunInput.llm_local_below_ms`) and for `llm_local_budget_ms` of
        model time; any call after a slow one is regular. A run's first call is regular
        unless its starter saw the model's latest calls all fast (`RunInput.fast_model`).
        Decided from the input and recorded results, so replay decides the same.
        """
        state = self._host._state
        last = state.last_llm_ms
        if last is None:
            return self.fast_start
        if last >= self._local_below_ms:
            return False
        if state.local_llm_ms + last > self._local_budget_ms:
            return False
        return True
