"""The router run's steps (`agent: "auto"`): `RunRouter`, composed by `AgentRunWorkflow`.

A router run is an agent run whose first act is to pick the agent: the rule filter,
one model classification, the dispatchability check (activities), then the pure
decision matrix (`keel.workflows.router.matrix`). Each round's decision is recorded, emitted and
audited. `clarifying` asks the user with an `ask_user` interaction and classifies
again with the answer; `routed` runs the chosen agent as a child run (the sub-agent
mechanism, with the request as its prompt) and ends with the child's result;
`refused` and `route_only` end with the decision as the report.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Protocol, get_args

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import InteractionRecords, Routing
    from keel.workflows.gate.gate import canonical_json
    from keel.workflows.interactions.models import Interaction, OpenInteractionsInput
    from keel.workflows.router import matrix as router
    from keel.workflows.router.models import (
        AdoptChildInput,
        CandidatesInput,
        CandidatesResult,
        Clarification,
        Classification,
        ClassifyInput,
        DispatchInput,
        RecordRouteInput,
        RouteDecision,
    )
    from keel.workflows.run import subagents
    from keel.workflows.run.interactions import RunInteractions
    from keel.workflows.run.model_steps import outlasting_outages
    from keel.workflows.run.models import RunInput, RunResult, RunState, RunStatus, StopReason
    from keel.workflows.run.notices import RunNotices
    from keel.workflows.run.subagent_models import SubagentTask
    from keel.workflows.run.subagent_runs import RunSubagents
    from keel.workflows.usage.models import Usage

__all__ = ["RouterHost", "RunRouter"]

# The hand-over is stored as the router's `task` call at this position of its step,
# where a sub-agent run looks for the call that started it.
HANDOVER_ORD = 2
# The routed child's limits are its own agent's: the router claims no share of them.
CHILD_TOOL_CALLS = 100_000


class RouterHost(Protocol):
    """What the agent run offers its router: its state, event numbers, record and end."""

    _state: RunState

    def _take_seqs(self, count: int) -> int: ...

    async def _record_opening(self) -> None: ...

    async def _finish(
        self,
        run: RunInput,
        status: RunStatus,
        reason: StopReason,
        *,
        error: str | None = None,
        final_step: int | None = None,
    ) -> RunResult: ...


class RunRouter:
    """`route`: what a run of `agent: "auto"` does instead of the step loop."""

    def __init__(
        self,
        host: RouterHost,
        subagent_runs: RunSubagents,
        interactions: RunInteractions,
        notices: RunNotices,
    ) -> None:
        self._host = host
        self._subagents = subagent_runs
        self._interactions = interactions
        self._notices = notices

    async def route(self, run: RunInput) -> RunResult:
        assert run.route is not None
        await self._host._record_opening()  # the first model call is not llm_step here
        found = await run_activity(
            Routing.route_candidates,
            CandidatesInput(run_id=run.run_id, tenant_id=run.tenant_id, roles=run.route.roles),
            timeouts.STORE_CALL,
            local=True,
        )
        clarifications: list[Clarification] = []
        while True:
            state = self._host._state
            state.step += 1
            round_ = state.step
            record = await self._decide_round(run, round_, found, clarifications)
            decision = record.decision
            if decision.outcome == "clarifying":
                question = decision.question or "Which agent should handle your request?"
                answer = await self._ask_back(run, round_, question)
                if answer is None:
                    return await self._refuse_unanswered(run, record)
                clarifications.append(Clarification(question=question, answer=answer))
                continue
            if decision.outcome == "routed":
                assert decision.agent is not None
                return await self._hand_over_to(run, round_, decision.agent)
            return await self._host._finish(run, "completed", "final_answer", final_step=round_)

    async def _decide_round(
        self,
        run: RunInput,
        round_: int,
        found: CandidatesResult,
        clarifications: list[Clarification],
    ) -> RecordRouteInput:
        """One round: classify, check the chosen agent, decide, and record the decision."""
        assert run.route is not None
        names = [c.name for c in found.candidates]
        classification = await self._classify(run, round_, names, clarifications)
        chosen = router.agent_to_check(names, classification)
        dispatch = None
        if chosen is not None:
            dispatch = await run_activity(
                Routing.check_dispatch,
                DispatchInput(agent=chosen),
                timeouts.STORE_CALL,
                local=True,
            )
        decision = router.decide(
            candidates=names,
            excluded=found.excluded,
            classification=classification,
            dispatch=dispatch,
            asked=len(clarifications),
            route_only=run.route.route_only,
        )
        record = RecordRouteInput(
            run_id=run.run_id,
            tenant_id=run.tenant_id,
            requester=run.requester,
            round=round_,
            event_seq=self._host._take_seqs(1),
            decision=decision,
            classification=classification,
            candidates=names,
            excluded=found.excluded,
            clarifications=clarifications,
            dispatch=dispatch,
        )
        await run_activity(
            Routing.record_route,
            record,
            timeouts.STORE_CALL,
            local=True,
            summary=f"route {decision.outcome} {decision.agent or ''}",
        )
        return record

    async def _refuse_unanswered(self, run: RunInput, asked: RecordRouteInput) -> RunResult:
        """An unanswered question is a decision too, on record like the others."""
        state = self._host._state
        state.step += 1
        unanswered = asked.model_copy(
            update={
                "round": state.step,
                "event_seq": self._host._take_seqs(1),
                "decision": RouteDecision(
                    outcome="refused",
                    reason="The router's question was not answered, so it did not "
                    "pick an agent; start again with more detail or an agent's name.",
                ),
                "dispatch": None,
            }
        )
        await run_activity(Routing.record_route, unanswered, timeouts.STORE_CALL, local=True)
        return await self._host._finish(run, "completed", "final_answer", final_step=state.step)

    async def _classify(
        self, run: RunInput, round_: int, names: list[str], clarifications: list[Clarification]
    ) -> Classification:
        if not names:
            return Classification(kind="none", reason="no candidate agents")
        job = ClassifyInput(
            run_id=run.run_id,
            tenant_id=run.tenant_id,
            round=round_,
            model=run.model,
            candidates=names,
            clarifications=clarifications,
        )
        # Like every model call: a store outage is waited out, not spent as an attempt.
        classification = await outlasting_outages(
            lambda: run_activity(
                Routing.classify_route,
                job,
                timeouts.route_classify(run.llm_max_attempts),
                summary=f"route classification {round_} · {run.model}",
            )
        )
        if classification.tokens:
            prompt, completion = classification.tokens
            state = self._host._state
            state.usage = state.usage.plus(
                Usage(prompt_tokens=prompt, completion_tokens=completion)
            )
        return classification

    async def _hand_over_to(self, run: RunInput, round_: int, agent: str) -> RunResult:
        """Run `agent` as the router's child, then end with the child's result."""
        state = self._host._state
        child_id = subagents.child_run_id(run.run_id, round_, HANDOVER_ORD)
        task = SubagentTask(
            step=round_,
            ord=HANDOVER_ORD,
            event_seq=self._host._take_seqs(2),
            max_tool_calls=CHILD_TOOL_CALLS,
            routed=True,
        )
        child = subagents.child_input(run, agent, task)
        answer = await self._subagents.run_child(child_id, f"route-{round_}", child)
        state.step += 1
        adopted = await run_activity(
            Routing.adopt_child_result,
            AdoptChildInput(
                run_id=run.run_id,
                child_run_id=child_id,
                step=state.step,
                handover_step=round_,
                handover_ord=HANDOVER_ORD,
                call_id=answer.call_id,
                event_seq=answer.event_seq,
            ),
            timeouts.STORE_CALL,
            local=True,
        )
        reason: StopReason = (
            adopted.stop_reason  # type: ignore[assignment]
            if adopted.stop_reason in _STOP_REASONS
            else "final_answer"
        )
        return await self._host._finish(
            run, adopted.status, reason, error=adopted.error, final_step=state.step
        )

    async def _ask_back(self, run: RunInput, round_: int, question: str) -> str | None:
        """Ask the requester `question` (an `ask_user` interaction); the answer, or None."""
        arguments = canonical_json({"question": question})
        now = workflow.now()
        expires_after = timedelta(
            seconds=run.approval_expires_after_s or run.agent.approval.expires_after_s
        )
        interaction = Interaction(
            id=subagents.interaction_id(run.run_id, run.parent_run_id, round_, HANDOVER_ORD),
            kind="ask_user",
            step=round_,
            ord=HANDOVER_ORD,
            call_id=f"route-{round_}",
            tool="ask_user",
            arguments=arguments,
            payload_hash=hashlib.sha256(
                canonical_json({"tool": "ask_user", "arguments": arguments}).encode()
            ).hexdigest(),
            risk="read",
            subject=question,
            question=question,
            requester=run.requester,
            approvers=[run.requester],
            created_at=now,
            expires_at=now + expires_after,
        )
        self._host._state.interactions[interaction.id] = interaction
        await run_activity(
            InteractionRecords.open_interactions,
            OpenInteractionsInput(
                run_id=run.run_id,
                tenant_id=run.tenant_id,
                session_id=run.session_id,
                interactions=[interaction],
                event_seq=self._host._take_seqs(1),
            ),
            timeouts.STORE_CALL,
            local=True,
            summary="ask router question",
        )
        await self._notices.notify(run, "waiting", interactions=[interaction])
        await self._interactions.await_decision(interaction)
        if interaction.status == "answered" and (interaction.answer or "").strip():
            return interaction.answer
        return None


_STOP_REASONS = set(get_args(StopReason))
