"""/v1/usage: the caller's tenant's LLM calls, tokens and cost per UTC day and agent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query

from keel.activities.store.console_reads import UsageRow
from keel.api.http.deps import ConsoleReadsDep, CurrentUser
from keel.api.http.errors import AUTHENTICATED

router = APIRouter(prefix="/v1/usage", tags=["usage"], responses=AUTHENTICATED)


@router.get("", response_model=list[UsageRow])
async def usage(
    user: CurrentUser,
    reads: ConsoleReadsDep,
    days: Annotated[int, Query(ge=1, le=366)] = 30,
) -> list[UsageRow]:
    """One row per day and agent with any LLM call in the last `days` days."""
    since = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(
        days=days - 1
    )
    return await reads.usage(user.tenant_id, since)
