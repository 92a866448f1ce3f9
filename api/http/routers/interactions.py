"""/v1/runs/{run_id}/interactions: list pending approvals and questions, and decide them."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from keel.api.core.schemas.common import StoredText
from keel.api.core.schemas.interactions import (
    DecisionResult,
    InteractionDecisionCreate,
    InteractionPublic,
)
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, documented

router = APIRouter(
    prefix="/v1/runs/{run_id}/interactions", tags=["interactions"], responses=AUTHENTICATED
)


@router.get("", response_model=list[InteractionPublic], responses=documented(404))
async def list_interactions(
    run_id: StoredText, user: CurrentUser, service: ServiceDep
) -> list[InteractionPublic]:
    return await service.runs.interactions(run_id, user)


@router.get("/{interaction_id}", response_model=InteractionPublic, responses=documented(404))
async def get_interaction(
    run_id: StoredText, interaction_id: StoredText, user: CurrentUser, service: ServiceDep
) -> InteractionPublic:
    return await service.runs.interaction(run_id, interaction_id, user)


@router.post(
    "/{interaction_id}",
    response_model=DecisionResult,
    responses={
        202: {"model": DecisionResult, "description": "Queued: no worker answered in time."},
        **documented(403, 404, 409, 503),
    },
)
async def decide(
    run_id: StoredText,
    interaction_id: StoredText,
    body: InteractionDecisionCreate,
    user: CurrentUser,
    service: ServiceDep,
    response: Response,
) -> DecisionResult:
    """Decide: 200 when the run took it (a repeat of the same decision answers 200 again),
    202 when no worker answered and Temporal keeps the decision for the run."""
    result = await service.decisions.decide(run_id, interaction_id, body, user)
    if result.status == "queued":
        response.status_code = status.HTTP_202_ACCEPTED
    return result
