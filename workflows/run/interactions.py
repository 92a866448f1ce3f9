"""The run's interactions: approvals, questions and client-executed calls.

`RunInteractions` opens the interactions a round of tool calls asks for, waits for
each decision or its expiry timer, stores the outcome (Postgres decides which request
took), and acts on it. `AgentRunWorkflow` composes it; its update, signal and query
handlers delegate here.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Protocol

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import InteractionRecords
    from keel.workflows.gate.gate import GateDecision, ToolGate
    from keel.workflows.gate.grants import (
        GRANTS_PATCH,
        GrantChange,
        NewGrant,
        apply_change,
        rules_with_grants,
    )
    from keel.workflows.gate.models import GateResult, MessageRef
    from keel.workflows.gate.permissions import PermissionRule
    from keel.workflows.gate.plugin_refs import hooks_for
    from keel.workflows.gate.tool_specs import Risk
    from keel.workflows.interactions.models import (
        DecisionOutcome,
        Interaction,
        InteractionDecision,
        OpenInteractionsInput,
        ResolveInteractionInput,
    )
    from keel.workflows.run import subagents
    from keel.workflows.run.approval_edits import EditRefused, check_edit, edit_note
    from keel.workflows.run.approval_grants import literal_glob, new_grant
    from keel.workflows.run.decision_checks import decision_problem
    from keel.workflows.run.hooks import RunHooks
    from keel.workflows.run.models import RunInput, RunState
    from keel.workflows.run.notices import RunNotices
    from keel.workflows.run.step_models import ToolDigest
    from keel.workflows.run.subagent_runs import RunSubagents
    from keel.workflows.run.tool_calls import RunToolCalls

__all__ = ["InteractionHost", "RunAborted", "RunInteractions", "is_task"]


class RunAborted(Exception):
    """The run must stop and fail, for a reason the policy gives."""


class InteractionHost(Protocol):
    """What the agent run offers its interactions."""

    _state: RunState
    _ids: RunInput
    """The run's record keys, for handlers that may run before `run` does."""
    _gate: ToolGate | None
    """The run's gate, once its loop has begun: edited arguments pass it again."""

    def _take_seqs(self, count: int) -> int: ...


class RunInteractions:
    """Opens, decides and settles the run's interactions; the workflow delegates here."""

    def __init__(
        self,
        host: InteractionHost,
        hooks: RunHooks,
        notices: RunNotices,
        subagent_runs: RunSubagents,
        tool_calls: RunToolCalls,
    ) -> None:
        self._host = host
        self._hooks = hooks
        self._notices = notices
        self._subagents = subagent_runs
        self._tools = tool_calls
        # Interactions whose decision is being stored right now: others wait or are refused.
        self.deciding: set[str] = set()
        # The grant each decision made, for its caller's answer.
        self.grant_ids: dict[str, str] = {}
        # `approve_always` decisions stored before grants (unpatched): a session rule each.
        self.session_ruled: set[str] = set()

    def answer_is_final(self, ref: MessageRef) -> bool:
        """Expired requests may be asked again; every other answer is reused."""
        for interaction in self._host._state.interactions.values():
            if interaction.step == ref.step and interaction.ord == ref.ord:
                return interaction.status != "expired"
        return True

    async def open(self, run: RunInput, asks: list[tuple[int, GateDecision]]) -> list[Interaction]:
        if not asks:
            return []
        policy = run.agent.approval
        expires_after = timedelta(seconds=run.approval_expires_after_s or policy.expires_after_s)
        now = workflow.now()
        created: list[Interaction] = []
        for ord_, decision in asks:
            assert decision.spec is not None
            question = decision.subject if decision.spec.group == "interact" else None
            interaction = Interaction(
                id=subagents.interaction_id(
                    run.run_id, run.parent_run_id, self._host._state.step, ord_
                ),
                kind="local_tool_result"
                if decision.local
                else ("ask_user" if question is not None else "confirm"),
                step=self._host._state.step,
                ord=ord_,
                call_id=decision.call.call_id,
                tool=decision.call.name,
                arguments=decision.canonical_arguments,
                payload_hash=decision.payload_hash,
                risk=decision.spec.risk,
                subject=decision.subject,
                question=question,
                requester=run.requester,
                # Only the client that started the run has the files a local call reads.
                approvers=[run.requester]
                if decision.local
                else self.approvers(run, decision.spec.risk),
                created_at=now,
                expires_at=now + expires_after,
            )
            self._host._state.interactions[interaction.id] = interaction
            created.append(interaction)
        await run_activity(
            InteractionRecords.open_interactions,
            OpenInteractionsInput(
                run_id=run.run_id,
                tenant_id=run.tenant_id,
                session_id=run.session_id,
                interactions=created,
                event_seq=self._host._take_seqs(len(created)),
            ),
            timeouts.STORE_CALL,
            local=True,
            summary="ask " + ", ".join(i.tool for i in created),
        )
        await self._notices.notify(run, "waiting", interactions=created)
        await self._subagents.tell_parent(run)
        return created

    def approvers(self, run: RunInput, risk: Risk) -> list[str]:
        policy = run.agent.approval
        named = run.approver or policy.approver
        approvers: list[str] = []
        if risk not in policy.no_self_approval:
            approvers.append(run.requester)
        if named and named not in approvers:
            approvers.append(named)
        return approvers

    async def await_decision(self, interaction: Interaction) -> None:
        """Return once the interaction is decided, or has expired and the expiry is stored."""
        try:
            await workflow.wait_condition(
                lambda: interaction.status != "pending",
                timeout=interaction.expires_at - workflow.now(),
            )
        except TimeoutError:
            pass
        if interaction.status == "pending":
            # The timer fired: a decision being stored settles first, else the expiry is
            # stored like a decision, and whichever Postgres holds is what happens.
            await workflow.wait_condition(lambda: interaction.id not in self.deciding)
            if interaction.status == "pending":
                expired = interaction.model_copy(
                    update={"status": "expired", "decision_id": str(workflow.uuid4())}
                )
                await self.store_outcome(expired, None)

    async def settle(
        self, run: RunInput, ord_: int, decision: GateDecision, interaction: Interaction
    ) -> ToolDigest | GateResult:
        """Wait for the decision or the expiry timer, record it, then act on it."""
        await self.await_decision(interaction)
        if interaction.decision == "approve_always" and interaction.id in self.session_ruled:
            self._host._state.session_rules.append(self.always_rule(interaction))
        await self._subagents.tell_parent(run)
        note = None
        if interaction.status == "approved" and interaction.approved_arguments is not None:
            try:  # the payload that runs is the one the approver edited in
                decision = self.edited(interaction, interaction.approved_arguments)
            except EditRefused as err:  # the rules changed since the approval
                interaction.status = "failed"
                return GateResult(
                    step=interaction.step,
                    ord=ord_,
                    call_id=interaction.call_id,
                    name=interaction.tool,
                    arguments=interaction.approved_arguments,
                    content=f"Error: {err} It did not run.",
                    is_error=True,
                    event_seq=self._host._take_seqs(2),
                )
            note = edit_note(interaction, interaction.approved_arguments)
        if interaction.status == "approved" and is_task(decision):
            interaction.status = "executing"
            answer = (await self._subagents.run_all(run, [(ord_, decision)]))[ord_]
            interaction.status = "failed" if answer.is_error else "executed"
            return answer
        if interaction.status == "approved":
            interaction.status = "executing"
            digest = await self._tools.run(
                run, ord_, decision, interaction_id=interaction.id, note=note
            )
            interaction.status = "failed" if digest.is_error else "executed"
            return digest
        if interaction.status == "expired" and run.agent.approval.on_expiry == "fail":
            raise RunAborted(
                f"the approval request {interaction.id} for {interaction.tool} expired "
                f"unanswered at {interaction.expires_at.isoformat()}"
            )
        if interaction.kind == "local_tool_result":
            return GateResult(
                step=interaction.step,
                ord=ord_,
                call_id=interaction.call_id,
                name=interaction.tool,
                arguments=interaction.arguments,
                content=_local_result(interaction),
                is_error=interaction.status != "answered"
                or (interaction.answer or "").startswith("Error:"),
                event_seq=self._host._take_seqs(2),
            )
        return GateResult(
            step=interaction.step,
            ord=ord_,
            call_id=interaction.call_id,
            name=interaction.tool,
            arguments=interaction.arguments,
            content=_interaction_answer(interaction),
            is_error=interaction.status != "answered",
            event_seq=self._host._take_seqs(2),
        )

    @staticmethod
    def always_rule(interaction: Interaction) -> PermissionRule:
        """What `approve_always` grants: this tool on exactly this subject."""
        return PermissionRule(
            permission=interaction.tool,
            pattern=literal_glob(interaction.subject),
            action="allow",
        )

    def problem_with(self, decision: InteractionDecision) -> tuple[str, str] | None:
        """Why a decision cannot take, as (error type, sentence), or None if it can."""
        return decision_problem(
            decision,
            self._host._state.interactions.get(decision.interaction_id),
            deciding=self.deciding,
            gate=self._host._gate,
            run=self._host._ids,
            clock=workflow.now,
            edit=self.edited,
        )

    async def hooks_refuse(self, decision: InteractionDecision) -> tuple[str, str] | None:
        """An edit meets the agent's `tool.before` hooks, as the model's call did: a deny
        refuses it. Only edited decisions of agents with hooks run them (new commands)."""
        interaction = self._host._state.interactions[decision.interaction_id]
        run = self._host._ids
        if decision.arguments is None or not hooks_for(
            run.agent.hooks, "tool.before", interaction.tool
        ):
            return None
        edited = self.edited(interaction, decision.arguments)
        [(_, judged)] = await self._hooks.before(run, [(interaction.ord, edited)])
        if judged.verdict == "deny":
            reason = judged.message.removeprefix("Error: ").split(" Do not retry")[0]
            return "EditRefused", f"The edited {interaction.tool} call is refused: {reason}"
        # Decided by another request while the hooks judged this one?
        return self.problem_with(decision)

    def edited(self, interaction: Interaction, arguments: str) -> GateDecision:
        """The gate's decision on `arguments` in place of the proposal's (`EditRefused`)."""
        gate = self._host._gate
        if gate is None:
            raise EditRefused(f"Interaction {interaction.id} cannot take edited arguments.")
        state = self._host._state
        rules = rules_with_grants(
            state.session_rules, state.grants, workflow.now(), gate.agent_rules
        )
        return check_edit(gate, interaction, arguments, rules)

    def apply(
        self, decision: InteractionDecision, interaction: Interaction | None = None
    ) -> Interaction:
        """Write `decision` into `interaction` (by default the run's own)."""
        interaction = interaction or self._host._state.interactions[decision.interaction_id]
        interaction.decision = decision.decision
        interaction.decided_by = decision.approver
        interaction.decided_at = workflow.now()
        interaction.answer = decision.text
        if decision.arguments is not None:
            edited = self.edited(interaction, decision.arguments)
            if edited.canonical_arguments != interaction.arguments:
                interaction.approved_arguments = edited.canonical_arguments
                interaction.approved_hash = edited.payload_hash
        interaction.status = {
            "approve": "approved",
            "approve_always": "approved",
            "reject": "rejected",
            "answer": "answered",
        }[decision.decision]  # type: ignore[assignment]
        return interaction

    async def claim(self, decision: InteractionDecision) -> Interaction:
        """Store the decision, then take whatever Postgres holds as the outcome.

        Stored before the update answers, by a regular activity: its command is recorded
        before it runs, so a workflow task that never reaches the history (a speculative
        one the server drops when updates race, a worker that dies) writes no outcome and
        tells no caller "accepted" — a local activity there did both, and the replayed
        task let the other decision win. Postgres decides which request took: the first
        outcome stored wins, every answer compares the stored `decision_id` with the
        request's own (the API sends one per request, so a request delivered again
        recognises itself), and the run follows what is stored.
        """
        interaction = self._host._state.interactions[decision.interaction_id]
        decision_id = decision.decision_id or str(workflow.uuid4())
        proposed = self.apply(decision, interaction.model_copy())
        proposed.decision_id = decision_id
        rule, grant = None, None
        if proposed.decision == "approve_always":
            if workflow.patched(GRANTS_PATCH):
                grant_id = str(workflow.uuid4())
                grant = new_grant(decision, proposed, self._host._ids, grant_id, workflow.now())
            else:
                rule = self.always_rule(proposed)
                self.session_ruled.add(proposed.id)
        self.deciding.add(interaction.id)
        try:
            await self.store_outcome(proposed, rule, grant)
        finally:
            self.deciding.discard(interaction.id)
        if interaction.decision_id != decision_id:
            raise ApplicationError(
                f"Interaction {interaction.id} is already {interaction.status}.",
                type="InteractionClosed",
                non_retryable=True,
            )
        return interaction

    async def store_outcome(
        self, proposed: Interaction, rule: PermissionRule | None, grant: NewGrant | None = None
    ) -> None:
        """`resolve_interaction` for `proposed`; the run's interaction becomes what is stored."""
        run = self._host._ids
        result = await run_activity(
            InteractionRecords.resolve_interaction,
            ResolveInteractionInput(
                run_id=run.run_id,
                tenant_id=run.tenant_id,
                session_id=run.session_id,
                interaction=proposed,
                new_session_rule=rule,
                event_seq=self._host._take_seqs(1),
                new_grant=grant,
            ),
            timeouts.STORE_CALL,
            # Regular, not local: its command is on record before it runs (see `_claim`).
            summary=f"{proposed.status} {proposed.tool}",
        )
        stored = result.interaction
        state = self._host._state
        if result.grant is not None:  # this decision took, and made a grant
            apply_change(state.grants, state.revoked_grants, GrantChange(added=[result.grant]))
            self.grant_ids[proposed.id] = result.grant.id
        interaction = state.interactions[proposed.id]
        interaction.decision = stored.decision
        interaction.decided_by = stored.decided_by
        interaction.decided_at = stored.decided_at
        interaction.answer = stored.answer
        interaction.decision_id = stored.decision_id
        interaction.approved_arguments = stored.approved_arguments
        interaction.approved_hash = stored.approved_hash
        # Past `approved` in Postgres means it is running or ran: the run is what runs it.
        interaction.status = (
            "approved" if stored.status in ("executing", "executed", "failed") else stored.status
        )

    async def decide(self, decision: InteractionDecision) -> DecisionOutcome:
        await self.opened(decision.interaction_id)
        interaction = self.took(decision)
        if interaction is None:
            problem = self.problem_with(decision) or await self.hooks_refuse(decision)
            if problem is not None:
                raise ApplicationError(problem[1], type=problem[0], non_retryable=True)
            interaction = await self.claim(decision)
        return DecisionOutcome(
            interaction_id=interaction.id,
            status=interaction.status,
            decision_id=interaction.decision_id,
            approved_arguments=interaction.approved_arguments,
            approved_hash=interaction.approved_hash,
            grant_id=self.grant_ids.get(interaction.id),
        )

    def validate(self, decision: InteractionDecision) -> None:
        if self.took(decision) is not None:
            return
        problem = self.problem_with(decision)
        # An interaction this run does not know yet may be on its way: see `_opened`.
        if problem is not None and problem[0] != "InteractionNotFound":
            raise ApplicationError(problem[1], type=problem[0], non_retryable=True)

    def took(self, decision: InteractionDecision) -> Interaction | None:
        """The interaction, if this very request (by `decision_id`) is what was stored.

        A request the server delivers again, after a workflow task that stored it was
        lost, is told it took, not that the interaction is closed."""
        interaction = self._host._state.interactions.get(decision.interaction_id)
        if interaction is None or decision.decision_id is None:
            return None
        return interaction if interaction.decision_id == decision.decision_id else None

    async def resolve(self, decision: InteractionDecision) -> None:
        await self.opened(decision.interaction_id)
        problem = self.problem_with(decision) or await self.hooks_refuse(decision)
        if problem is not None:
            workflow.logger.warning("ignored decision %s: %s", decision.interaction_id, problem[1])
        else:
            try:
                await self.claim(decision)
            except ApplicationError as err:
                workflow.logger.warning("ignored decision %s: %s", decision.interaction_id, err)

    async def opened(self, interaction_id: str) -> None:
        """Wait a little for an interaction that the store has and this run does not yet.

        A worker that takes over a run replays it, and a decision can arrive in the
        same workflow task as the model's reply that asks for the approval: the
        decision is handled first, before the replay has opened the interaction again.
        """
        if interaction_id in self._host._state.interactions:
            return
        with contextlib.suppress(TimeoutError):  # then the caller says it is not found
            await workflow.wait_condition(
                lambda: interaction_id in self._host._state.interactions,
                timeout=timeouts.DECISION_WAITS_FOR_INTERACTION,
            )


def is_task(decision: GateDecision) -> bool:
    return decision.spec is not None and decision.spec.group == "task"


def _local_result(interaction: Interaction) -> str:
    if interaction.status == "answered":
        return interaction.answer or ""
    if interaction.status == "rejected":
        reason = f" Reason: {interaction.answer}" if interaction.answer else ""
        return f"Error: the client refused to run this {interaction.tool} call.{reason}"
    return (
        f"Error: the client did not run this {interaction.tool} call before it expired at "
        f"{interaction.expires_at.isoformat()}; the files it reads are only on the client."
    )


def _interaction_answer(interaction: Interaction) -> str:
    if interaction.status == "answered":
        return f"The user answered: {interaction.answer}"
    if interaction.status == "rejected":
        reason = f" Reason: {interaction.answer}" if interaction.answer else ""
        return (
            f"Error: the user rejected this {interaction.tool} call; it did not run.{reason} "
            "Do not repeat it unchanged."
        )
    return (
        f"Error: nobody answered the request to run {interaction.tool} before it expired "
        f"at {interaction.expires_at.isoformat()}; it did not run."
    )
