"""/v1/schedule-preview: when a schedule would fire, before it is created."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from keel.api.core.errors import Invalid
from keel.api.core.schedules.schemas import ScheduleCreate
from keel.api.core.schedules.specs import fire_times
from keel.api.http.deps import CurrentUser
from keel.api.http.errors import AUTHENTICATED

router = APIRouter(prefix="/v1/schedule-preview", tags=["schedules"], responses=AUTHENTICATED)


class SchedulePreview(BaseModel):
    next_fire_times: list[datetime] = Field(description="UTC, jitter aside, as Temporal fires.")


@router.post("", response_model=SchedulePreview)
async def preview_schedule(
    body: ScheduleCreate,
    user: CurrentUser,
    count: Annotated[int, Query(ge=1, le=50)] = 5,
) -> SchedulePreview:
    """The next fire times of a schedule with this spec; nothing is created."""
    if bool(body.cron_expressions) == (body.interval_s is not None):
        raise Invalid(
            "Give either cron_expressions or interval_s: one says when the schedule fires.",
            field="cron_expressions",
        )
    return SchedulePreview(next_fire_times=fire_times(body, datetime.now(UTC), limit=count))
