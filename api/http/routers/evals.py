"""/v1/evals: what `keel eval` found, recorded per tenant, listed by the console."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from keel.api.core.schemas.common import StoredText
from keel.api.core.schemas.evals import EvalResultCreate, EvalResultPublic, EvalResultSummary
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, documented

router = APIRouter(prefix="/v1/evals", tags=["evals"], responses=AUTHENTICATED)


@router.post("", response_model=EvalResultPublic, responses=documented(409))
async def record_eval(
    body: EvalResultCreate, user: CurrentUser, service: ServiceDep
) -> EvalResultPublic:
    """Record an eval's results; the same id and report again is the same result."""
    return await service.evals.record(body, user)


@router.get("", response_model=list[EvalResultSummary])
async def list_evals(
    user: CurrentUser,
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> list[EvalResultSummary]:
    """The tenant's eval results, newest first."""
    return await service.evals.recent(user, limit)


@router.get("/{eval_id}", response_model=EvalResultPublic, responses=documented(404))
async def get_eval(eval_id: StoredText, user: CurrentUser, service: ServiceDep) -> EvalResultPublic:
    """One eval result with every scenario and attempt."""
    return await service.evals.get(eval_id, user)
