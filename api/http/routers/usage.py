"""/v1/usage: the caller's tenant's LLM calls, tokens and cost per UTC day and agent."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from keel.activities.store.console_reads import UsageRow
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED

router = APIRouter(prefix="/v1/usage", tags=["usage"], responses=AUTHENTICATED)


@router.get("", response_model=list[UsageRow])
async def usage(
    user: CurrentUser,
    service: ServiceDep,
    days: Annotated[int, Query(ge=1, le=366)] = 30,
) -> list[UsageRow]:
    """One row per day and agent with any LLM call in the last `days` days."""
    return await service.usage.daily(user, days)
