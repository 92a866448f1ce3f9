"""Deciding what a run waits on: the checks, the `decide` update, and its answers.

The REST endpoint and the MCP `decide` tool share this, so a decision takes (or is
refused) the same way through either; refusals are audited.
"""

from __future__ import annotations

from datetime import timedelta

from fastapi import HTTPException
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from activities.store.interaction_store import InteractionStore
from activities.store.run_store import Store
from api.core.audit_trail import ApiAudit
from api.core.run_reads import run_for
from api.core.schemas import DecisionResult, InteractionDecisionCreate, InteractionPublic
from api.identity.auth import Principal
from api.identity.config import user_ref
from workflows.agent_run import AgentRunWorkflow
from workflows.models import DecisionOutcome, InteractionDecision

DECIDE_TIMEOUT = timedelta(seconds=15)
STATUS_OF_PROBLEM = {
    "InteractionNotFound": 404,
    "InteractionClosed": 409,
    "NotAnApprover": 403,
    "PayloadHashMismatch": 422,
    "InvalidDecision": 422,
}


async def decide_interaction(
    run_id: str,
    interaction_id: str,
    body: InteractionDecisionCreate,
    user: Principal,
    *,
    store: Store,
    interactions: InteractionStore,
    temporal: Client,
    audit: ApiAudit,
) -> DecisionResult:
    """Hand the caller's decision to the run; an `HTTPException` says why it did not take."""
    await run_for(run_id, user, store, audit, allow_admin=False)
    # The store has every interaction a run opened; the run itself may be replaying.
    if await interactions.get(run_id, interaction_id) is None:
        raise HTTPException(404, detail=f"No interaction {interaction_id} in run {run_id}.")
    decision = InteractionDecision(
        interaction_id=interaction_id,
        decision=body.decision,
        approver=user_ref(user),
        payload_hash=body.payload_hash,
        text=body.text,
    )
    handle = temporal.get_workflow_handle_for(AgentRunWorkflow.run, run_id)
    try:
        outcome: DecisionOutcome = await handle.execute_update(
            "decide", decision, result_type=DecisionOutcome, rpc_timeout=DECIDE_TIMEOUT
        )
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        kind = cause.type if isinstance(cause, ApplicationError) else None
        code = STATUS_OF_PROBLEM.get(kind or "", 422)
        await audit.refused_decision(user, run_id, interaction_id, body.decision, str(cause))
        raise HTTPException(code, detail=str(cause)) from err
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            # The run has finished: nothing it waited on can be decided any more.
            known = await interactions.get(run_id, interaction_id)
            if known is None:
                raise HTTPException(404, detail=f"No interaction {interaction_id}.") from err
            raise HTTPException(
                409, detail=f"Interaction {interaction_id} is already {known.status}."
            ) from err
        raise HTTPException(
            503,
            detail="No worker answered in time, so the decision may not have been recorded; "
            "check the interaction and try again.",
        ) from err
    ia = await interactions.get(run_id, interaction_id)
    assert ia is not None
    # The workflow has taken the decision; its mirror in Postgres follows a moment later.
    ia = ia.model_copy(
        update={
            "status": outcome.status,
            "decision": body.decision,
            "decided_by": decision.approver,
            "answer": body.text,
        }
    )
    return DecisionResult(
        status="accepted", interaction=InteractionPublic.from_interaction(run_id, ia)
    )
