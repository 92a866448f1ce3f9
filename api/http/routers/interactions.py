"""/v1/runs/{run_id}/interactions: list pending approvals and questions, and decide them."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from api.core.decisions import decide_interaction
from api.core.run_reads import run_for
from api.core.schemas import (
    DecisionResult,
    InteractionDecisionCreate,
    InteractionPublic,
    StoredText,
)
from api.http.deps import AuditDep, CurrentUser, InteractionStoreDep, StoreDep, TemporalDep
from api.http.errors import AUTHENTICATED, documented

router = APIRouter(
    prefix="/v1/runs/{run_id}/interactions", tags=["interactions"], responses=AUTHENTICATED
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
    return [
        InteractionPublic.from_interaction(run_id, ia) for ia in await interactions.for_run(run_id)
    ]


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
    return InteractionPublic.from_interaction(run_id, ia)


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
    return await decide_interaction(
        run_id,
        interaction_id,
        body,
        user,
        store=store,
        interactions=interactions,
        temporal=temporal,
        audit=audit,
    )
