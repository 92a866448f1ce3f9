"""Deciding what a run waits on: the checks, the `decide` update, and its answers.

Every surface (REST, MCP, A2A, the CLI through REST) decides through here, so a
decision takes, or is refused and audited, the same way whichever door it came in by.

A decision goes to the run as the workflow's `decide` update, which answers at once
whether it took. With no worker to run the update (or a run whose workflow task keeps
failing, which Temporal admits no update to), the decision is sent as the
`resolve_interaction` signal instead, which Temporal keeps until a worker takes it, and
the caller hears `queued`. Sending the same decision again is idempotent: once it has
taken, the answer is `accepted` again, not a conflict.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta

from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from keel.activities.store.interaction_closing import closed_sentence
from keel.activities.store.records import RunRecord
from keel.api.core.context import TEMPORAL_CALL_TIMEOUT, CoreParts
from keel.api.core.errors import (
    Conflict,
    Forbidden,
    Invalid,
    KeelError,
    NotFound,
    known_id,
)
from keel.api.core.local_results import local_result_refusal
from keel.api.core.run_tree import child_owning
from keel.api.core.runs import RunService
from keel.api.core.schemas.interactions import (
    DecisionResult,
    InteractionDecisionCreate,
    InteractionPublic,
)
from keel.api.core.secret_answers import SecretAnswers
from keel.api.core.temporal_errors import from_temporal, namespace_missing, temporal_refusals
from keel.api.core.tenant_ids import in_view, interaction_key
from keel.api.identity.auth import Principal
from keel.api.identity.config import user_ref
from keel.workflows.gate.gate import canonical_json
from keel.workflows.interactions.models import DecisionOutcome, Interaction, InteractionDecision
from keel.workflows.run.agent_run import AgentRunWorkflow

# A worker runs the update in milliseconds; this long without an answer means none is
# polling, and the decision is queued as a signal instead.
DECIDE_WAIT = timedelta(seconds=3)
READ_WAIT = timedelta(seconds=2)
STORED_POLL_S = 0.05
ERROR_OF_PROBLEM: dict[str, type[KeelError]] = {
    "InteractionNotFound": NotFound,
    "InteractionClosed": Conflict,
    "NotAnApprover": Forbidden,
    "PayloadHashMismatch": Invalid,
    "InvalidDecision": Invalid,
    "EditRefused": Invalid,
    "GrantRefused": Invalid,
}


# Failure types the Temporal server (not the run) gives an update: the run never saw it,
# or the run ended before it could take it.
UNPROCESSED = "UnprocessedUpdate"
UNSEEN_TRIES = 6
UNSEEN_BACKOFF_S = 0.1
RUN_ENDED = frozenset({"CanceledUpdate", "AcceptedUpdateCompletedWorkflowFailure"})


TASK_FAILING = "workflow task in failed state"
"""Temporal's FAILED_PRECONDITION for an update to a run whose workflow task keeps
failing or timing out (its worker died in it, or is too loaded to finish it): the server
admits no update until a task completes, but takes signals."""


def _unseen(err: BaseException) -> bool:
    """The run never saw the decision, and a signal will reach it: no worker took the
    update in time, the server dropped it unprocessed, or the run's workflow task is
    failing and the server admits no update until one completes."""
    if isinstance(err, WorkflowUpdateRPCTimeoutOrCancelledError):
        return True
    if isinstance(err, WorkflowUpdateFailedError):
        return isinstance(err.cause, ApplicationError) and err.cause.type == UNPROCESSED
    if isinstance(err, RPCError):
        return (
            err.status == RPCStatusCode.FAILED_PRECONDITION and TASK_FAILING in err.message.lower()
        )
    return False


class InteractionClosed(Conflict):
    """The interaction was already decided (otherwise) or has expired."""


class _DecidedMeanwhile(Exception):
    """The interaction stopped being pending while a request for it was being resent."""

    def __init__(self, current: Interaction) -> None:
        super().__init__(current.id)
        self.current = current


@temporal_refusals("record the decision")
class DecisionService:
    """Decide interactions, within the caller's tenant, as the caller."""

    def __init__(self, parts: CoreParts, runs: RunService) -> None:
        self._parts = parts
        self._runs = runs
        self._secrets = SecretAnswers(parts)

    async def decide(
        self,
        run_id: str,
        interaction_id: str,
        body: InteractionDecisionCreate,
        user: Principal,
        *,
        decision_id: str | None = None,
    ) -> DecisionResult:
        """Hand the caller's decision to the run; a `KeelError` says why it did not take.

        `decision_id` names the request when the surface can tell a retry of it (A2A's
        message id); otherwise each call is a request of its own, and a repeat of the
        decision that took is told it took all the same.
        """
        result = await self._decide(run_id, interaction_id, body, user, decision_id)
        shown = result.interaction
        shown.id, shown.run_id = (
            in_view(user.tenant_id, shown.id),
            in_view(user.tenant_id, shown.run_id),
        )
        return result

    async def _decide(
        self,
        run_id: str,
        interaction_id: str,
        body: InteractionDecisionCreate,
        user: Principal,
        decision_id: str | None,
    ) -> DecisionResult:
        parts = self._parts
        record = await self._runs.get(run_id, user, allow_admin=False)
        shown, run_id = run_id, record.id
        interaction_id = interaction_key(record, known_id(interaction_id, "interaction"))
        # The store has every interaction a run opened; the run itself may be replaying.
        stored = await parts.interactions.get(run_id, interaction_id)
        if stored is None and (child := await child_owning(parts.store, record, interaction_id)):
            # A sub-agent's: decided as through the child's own endpoint, checks and all.
            return await self._decide(child, interaction_id, body, user, decision_id)
        if stored is None:
            raise NotFound(
                f"No interaction {in_view(user.tenant_id, interaction_id)} in run {shown}."
            )
        refusal = local_result_refusal(
            stored, body.decision, in_view(user.tenant_id, interaction_id)
        )
        if refusal is not None:
            await parts.audit.refused_decision(user, run_id, interaction_id, body.decision, refusal)
            raise Invalid(refusal)
        if body.grant is not None:
            refused = self._runs.grants.refusal(body.grant, stored, user, body.decision)
            if refused is not None:
                await parts.audit.refused_decision(
                    user, run_id, interaction_id, body.decision, str(refused)
                )
                raise refused
        # A secret request's answer is a reference to the sealed value, never the value.
        text = await self._secrets.text_of(
            run_id, stored, body, user, in_view(user.tenant_id, interaction_id)
        )
        decision = InteractionDecision(
            interaction_id=interaction_id,
            grant=None if body.grant is None else body.grant.scope(),
            decision=body.decision,
            approver=user_ref(user),
            payload_hash=body.payload_hash,
            text=text,
            arguments=None if body.arguments is None else canonical_json(body.arguments),
            # Names this request, so the run can tell it took even if delivered twice.
            decision_id=decision_id or uuid.uuid4().hex,
        )
        try:
            try:
                outcome = await self._send(run_id, decision)
            except (
                WorkflowUpdateRPCTimeoutOrCancelledError,
                WorkflowUpdateFailedError,
                RPCError,
            ) as err:
                if not _unseen(err):
                    raise
                # No worker took it in time, none processed it, or none can yet: leave it
                # with Temporal, unless it was decided meanwhile (then the signal would be
                # ignored).
                await self._unless_decided(run_id, decision)
                return await self._queue(run_id, decision, stored)
        except _DecidedMeanwhile as meanwhile:
            await self._secrets.discard(text, stored)
            return await self._too_late(run_id, decision, user, meanwhile.current)
        except WorkflowUpdateFailedError as err:
            await self._secrets.discard(text, stored)  # the run did not take this reference
            cause = err.cause
            kind = cause.type if isinstance(cause, ApplicationError) else None
            if kind in RUN_ENDED:
                return await self._after_the_run(run_id, decision, user)
            # The run's sentence, without the type it names its refusal by.
            reason = cause.message if isinstance(cause, ApplicationError) else str(cause)
            if kind == "InteractionClosed":
                current = await self._current(run_id, interaction_id)
                if current is not None and current.status == "pending":
                    # Another request's decision is being stored: a repeat of it (a client
                    # that sent it again, its first connection broken) hears how it went.
                    current = await self._stored(run_id, interaction_id) or current
                if current is not None and _repeats(current, decision):
                    return _accepted(run_id, current)
            await parts.audit.refused_decision(user, run_id, interaction_id, body.decision, reason)
            if kind == "InteractionClosed":
                raise InteractionClosed(reason) from err
            raise ERROR_OF_PROBLEM.get(kind or "", Invalid)(reason) from err
        except RPCError as err:
            await self._secrets.discard(text, stored)
            if err.status == RPCStatusCode.NOT_FOUND and not namespace_missing(err):
                return await self._after_the_run(run_id, decision, user)
            # Racing requests can keep Temporal from answering this one (too many updates
            # in flight for one run) while another decides it: then that is the answer.
            current = await parts.interactions.get(run_id, interaction_id)
            if current is not None and current.status != "pending":
                return await self._too_late(run_id, decision, user, current)
            raise from_temporal(
                err,
                doing="record the decision",
                namespace=parts.namespace,
                retry="Temporal did not answer, so the decision was not recorded; send it "
                "again shortly.",
            ) from err
        # The workflow has taken the decision; its mirror in Postgres follows a moment later.
        taken = stored.model_copy(
            update={
                "status": outcome.status,
                "decision": body.decision,
                "decided_by": decision.approver,
                "answer": text,
                "approved_arguments": outcome.approved_arguments,
                "approved_hash": outcome.approved_hash,
            }
        )
        result = _result("accepted", run_id, taken)
        if outcome.grant_id is not None:  # the other runs it covers hear of it now
            result.grant = await self._runs.grants.made(
                outcome.grant_id, record.tenant_id, besides=run_id
            )
        return result

    async def _send(self, run_id: str, decision: InteractionDecision) -> DecisionOutcome:
        """The `decide` update, sent again while the server says the run never saw it.

        Updates racing for one run meet two refusals from the Temporal server, not the
        run: `UnprocessedUpdate` (a workflow task that carried it completed without the
        run processing it; racing updates make the server drop and redo speculative
        tasks) and RESOURCE_EXHAUSTED (more updates in flight for one run than the
        server admits at once). Either way the run ran no check, so nothing was decided:
        the same request (the same `decision_id`) is sent again, unless the interaction
        has been decided meanwhile, which `_DecidedMeanwhile` reports.
        """
        handle = self._parts.temporal.get_workflow_handle_for(AgentRunWorkflow.run, run_id)
        for attempt in range(UNSEEN_TRIES):
            last = attempt == UNSEEN_TRIES - 1
            try:
                # The SDK asks again while the server has not admitted the update, each
                # call with its own timeout; with no worker that came to twice the wait.
                # One wait bounds them all: past it the decision is queued as a signal.
                async with asyncio.timeout(DECIDE_WAIT.total_seconds()):
                    return await handle.execute_update(
                        AgentRunWorkflow.decide, decision, rpc_timeout=DECIDE_WAIT
                    )
            except TimeoutError as err:
                raise WorkflowUpdateRPCTimeoutOrCancelledError() from err
            except WorkflowUpdateFailedError as err:
                cause = err.cause
                if last or not (isinstance(cause, ApplicationError) and cause.type == UNPROCESSED):
                    raise
            except RPCError as err:
                if last or err.status != RPCStatusCode.RESOURCE_EXHAUSTED:
                    raise
            await self._unless_decided(run_id, decision)
            await asyncio.sleep(UNSEEN_BACKOFF_S * (attempt + 1))
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _unless_decided(self, run_id: str, decision: InteractionDecision) -> None:
        """Raise `_DecidedMeanwhile` if the interaction is no longer pending.

        Read from Postgres, which holds an outcome before the run answers (and answers
        when no worker does)."""
        current = await self._parts.interactions.get(run_id, decision.interaction_id)
        if current is not None and current.status != "pending":
            raise _DecidedMeanwhile(current)

    async def _too_late(
        self, run_id: str, decision: InteractionDecision, user: Principal, current: Interaction
    ) -> DecisionResult:
        """The interaction was decided while this request waited: it took, or it is refused."""
        if current.decision_id == decision.decision_id or _repeats(current, decision):
            return _accepted(run_id, current)
        reason = _closed(current)
        await self._parts.audit.refused_decision(
            user, run_id, decision.interaction_id, decision.decision, reason
        )
        raise InteractionClosed(reason)

    async def _queue(
        self, run_id: str, decision: InteractionDecision, stored: Interaction
    ) -> DecisionResult:
        """No worker ran the update in time: leave the decision with Temporal as a signal,
        which the run applies (with the same checks) when a worker takes it up."""
        handle = self._parts.temporal.get_workflow_handle_for(AgentRunWorkflow.run, run_id)
        try:
            await handle.signal(
                AgentRunWorkflow.resolve_interaction, decision, rpc_timeout=TEMPORAL_CALL_TIMEOUT
            )
        except RPCError as err:
            raise from_temporal(
                err,
                doing="queue the decision",
                namespace=self._parts.namespace,
                retry="No worker answered and Temporal did not take the decision; send it "
                "again shortly.",
            ) from err
        return _result("queued", run_id, stored)

    async def _after_the_run(
        self, run_id: str, decision: InteractionDecision, user: Principal
    ) -> DecisionResult:
        """The run has finished: nothing it waited on can be decided any more, but the
        decision that took can be repeated and hear so."""
        parts = self._parts
        known = await parts.interactions.get(run_id, decision.interaction_id)
        if known is None:
            raise NotFound(f"No interaction {decision.interaction_id}.")
        if _repeats(known, decision):
            return _accepted(run_id, known)
        if known.status == "pending":
            # The workflow closed without recording its end (terminated, timed out).
            await parts.store.end_closed_elsewhere(
                run_id, status="failed", error="The workflow was closed in Temporal."
            )
            known = await parts.interactions.get(run_id, decision.interaction_id) or known
        run = await parts.store.get_run(run_id)
        reason = _closed(known, run)
        await parts.audit.refused_decision(
            user, run_id, decision.interaction_id, decision.decision, reason
        )
        raise InteractionClosed(reason)

    async def _stored(self, run_id: str, interaction_id: str) -> Interaction | None:
        """The interaction once a decision of it is stored in Postgres (None if none is
        within `DECIDE_WAIT`): the run stores one before it answers its request."""
        deadline = asyncio.get_running_loop().time() + DECIDE_WAIT.total_seconds()
        while asyncio.get_running_loop().time() < deadline:
            stored = await self._parts.interactions.get(run_id, interaction_id)
            if stored is not None and stored.status != "pending":
                return stored
            await asyncio.sleep(STORED_POLL_S)
        return None

    async def _current(self, run_id: str, interaction_id: str) -> Interaction | None:
        """The interaction as the run has it now (Postgres if the run cannot answer)."""
        handle = self._parts.temporal.get_workflow_handle_for(AgentRunWorkflow.run, run_id)
        try:
            every = await handle.query(AgentRunWorkflow.list_interactions, rpc_timeout=READ_WAIT)
            return next((i for i in every if i.id == interaction_id), None)
        except RPCError:
            return await self._parts.interactions.get(run_id, interaction_id)


def _closed(interaction: Interaction, run: RunRecord | None = None) -> str:
    """Why a decision on `interaction` cannot take; `run` (ended) says why it was cancelled."""
    if run is None:
        return f"Interaction {interaction.id} is already {interaction.status}."
    shown = in_view(run.tenant_id, interaction.id), in_view(run.tenant_id, run.id)
    return closed_sentence(shown[0], interaction.status, shown[1], run.status)


def _repeats(interaction: Interaction, decision: InteractionDecision) -> bool:
    """Whether the decision is the one the interaction already took, from the same person."""
    if interaction.decision != decision.decision or interaction.decided_by != decision.approver:
        return False
    if decision.decision.startswith("approve"):
        return decision.payload_hash == interaction.payload_hash and _same_edit(
            interaction, decision.arguments
        )
    return (interaction.answer or None) == (decision.text or None)


def _same_edit(interaction: Interaction, arguments: str | None) -> bool:
    """Whether `arguments` (None: as proposed) are what the interaction was approved with.

    The run stores the arguments completed with the tool's defaults, so an edit repeats if
    each argument it names has the stored value."""
    approved = json.loads(interaction.approved_arguments or interaction.arguments)
    sent = json.loads(arguments) if arguments is not None else json.loads(interaction.arguments)
    return all(approved.get(key) == value for key, value in sent.items())


def _accepted(run_id: str, interaction: Interaction) -> DecisionResult:
    """A decision that had already taken, answered with the interaction as it is now:
    `approved`, or as far as the approved call has run since (`executing`, `executed`,
    `failed`), whichever path (a resend, a repeat, a repeat after the run) found it."""
    return _result("accepted", run_id, interaction)


def _result(status: str, run_id: str, interaction: Interaction) -> DecisionResult:
    return DecisionResult(
        status=status,  # type: ignore[arg-type]
        # Keys as stored; `decide` shows them as the caller's tenant knows them.
        interaction=InteractionPublic.from_interaction(run_id, interaction, tenant_id=""),
    )
