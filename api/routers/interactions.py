"""/v1/runs/{run_id}/interactions: list pending approvals and questions, and decide them."""

from __future__ import annotations

import json
from datetime import timedelta

from fastapi import APIRouter, HTTPException
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from api.deps import AuditDep, CurrentUser, InteractionStoreDep, StoreDep, TemporalDep
from api.errors import AUTHENTICATED, documented
from api.identity import user_ref
from api.routers.runs import run_for
from api.schemas import (
    DecisionResult,
    InteractionDecisionCreate,
    InteractionPublic,
    StoredText,
)
from workflows.agent_run import AgentRunWorkflow
from workflows.models import DecisionOutcome, Interaction, InteractionDecision

router = APIRouter(
    prefix="/v1/runs/{run_id}/interactions", tags=["interactions"], responses=AUTHENTICATED
)

DECIDE_TIMEOUT = timedelta(seconds=15)
STATUS_OF_PROBLEM = {
    "InteractionNotFound": 404,
    "InteractionClosed": 409,
    "NotAnApprover": 403,
    "PayloadHashMismatch": 422,
    "InvalidDecision": 422,
}


def _public(run_id: str, ia: Interaction) -> InteractionPublic:
    return InteractionPublic(
        id=ia.id,
        run_id=run_id,
        kind=ia.kind,
        status=ia.status,
        tool=ia.tool,
        subject=ia.subject,
        arguments=json.loads(ia.arguments),
        payload_hash=ia.payload_hash,
        risk=ia.risk,
        question=ia.question,
        requester=ia.requester,
        approvers=ia.approvers,
        created_at=ia.created_at,
        expires_at=ia.expires_at,
        decision=ia.decision,
        decided_by=ia.decided_by,
        decided_at=ia.decided_at,
        answer=ia.answer,
    )


@router.get("", response_model=list[InteractionPublic], responses=documented(404))
async def list_interactions(
    run_id: StoredText,
    user: CurrentUser,
    store: StoreDep,
    interactions: InteractionStoreDep,
    audit: AuditDep,
) -> list[InteractionPublic]:
    await run_for(run_id, user, store, audit)
    return [_public(run_id, ia) for ia in await interactions.for_run(run_id)]


@router.get("/{interaction_id}", response_model=InteractionPublic, responses=documented(404))
async def get_interaction(
    run_id: StoredText,
    interaction_id: StoredText,
    user: CurrentUser,
    store: StoreDep,
    interactions: InteractionStoreDep,
    audit: AuditDep,
) -> InteractionPublic:
    await run_for(run_id, user, store, audit)
    ia = await interactions.get(run_id, interaction_id)
    if ia is None:
        raise HTTPException(404, detail=f"No interaction {interaction_id} in run {run_id}.")
    return _public(run_id, ia)


@router.post(
    "/{interaction_id}",
    response_model=DecisionResult,
    responses=documented(403, 404, 409, 503),
)
async def decide(
    run_id: StoredText,
    interaction_id: StoredText,
    body: InteractionDecisionCreate,
    user: CurrentUser,
    store: StoreDep,
    interactions: InteractionStoreDep,
    temporal: TemporalDep,
    audit: AuditDep,
) -> DecisionResult:
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
    return DecisionResult(status="accepted", interaction=_public(run_id, ia))
