"""/v1/schedules: agent runs on Temporal Schedules, scoped to the caller's tenant.

The service (`keel.api.core.schedules.service`) checks, translates and keeps tenants apart; another
tenant's schedule answers 404.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Response, status

from keel.api.core.page_cursor import decode_cursor, encode_cursor
from keel.api.core.schedules.schemas import (
    ScheduleBackfillAccepted,
    ScheduleBackfillCreate,
    ScheduleCreate,
    ScheduleList,
    ScheduleNoteCreate,
    SchedulePublic,
    ScheduleTriggerCreate,
    ScheduleTriggered,
    ScheduleUpdate,
)
from keel.api.core.schemas.runs import RunList, RunPublic
from keel.api.core.schemas.usage import tree_usage_public
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, documented

router = APIRouter(prefix="/v1/schedules", tags=["schedules"], responses=AUTHENTICATED)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=SchedulePublic,
    responses=documented(409),
)
async def create_schedule(
    body: ScheduleCreate, user: CurrentUser, service: ServiceDep
) -> SchedulePublic:
    """Create a schedule; its runs are ordinary runs with trigger `schedule`."""
    return await service.schedules.create(body, user)


@router.get("", response_model=ScheduleList)
async def list_schedules(
    user: CurrentUser,
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    after: Annotated[str | None, Query(max_length=64)] = None,
) -> ScheduleList:
    """The tenant's schedules, by id. Temporal's list is eventually consistent: a schedule
    created a moment ago may take a second to appear."""
    return await service.schedules.page(user, limit=limit, after=after)


@router.get("/{schedule_id}", response_model=SchedulePublic, responses=documented(404))
async def get_schedule(schedule_id: str, user: CurrentUser, service: ServiceDep) -> SchedulePublic:
    """The schedule, its next fire times, and the runs it started lately."""
    return await service.schedules.describe(schedule_id, user)


@router.patch("/{schedule_id}", response_model=SchedulePublic, responses=documented(404))
async def update_schedule(
    schedule_id: str, body: ScheduleUpdate, user: CurrentUser, service: ServiceDep
) -> SchedulePublic:
    """Change what the schedule starts or when; runs already started are not touched."""
    return await service.schedules.update(schedule_id, body, user)


@router.post("/{schedule_id}/pause", response_model=SchedulePublic, responses=documented(404))
async def pause_schedule(
    schedule_id: str,
    user: CurrentUser,
    service: ServiceDep,
    body: Annotated[ScheduleNoteCreate | None, Body()] = None,
) -> SchedulePublic:
    """Stop firing until unpaused; runs already going carry on."""
    return await service.schedules.pause(schedule_id, body.note if body else None, user)


@router.post("/{schedule_id}/unpause", response_model=SchedulePublic, responses=documented(404))
async def unpause_schedule(
    schedule_id: str,
    user: CurrentUser,
    service: ServiceDep,
    body: Annotated[ScheduleNoteCreate | None, Body()] = None,
) -> SchedulePublic:
    """Fire again from the next fire time (missed ones within the catch-up window run)."""
    return await service.schedules.unpause(schedule_id, body.note if body else None, user)


@router.post(
    "/{schedule_id}/trigger",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=ScheduleTriggered,
    responses=documented(404),
)
async def trigger_schedule(
    schedule_id: str,
    user: CurrentUser,
    service: ServiceDep,
    body: Annotated[ScheduleTriggerCreate | None, Body()] = None,
) -> ScheduleTriggered:
    """Start a run now, paused or not; the overlap policy still applies."""
    return await service.schedules.trigger(schedule_id, body.overlap if body else None, user)


@router.post(
    "/{schedule_id}/backfill",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=ScheduleBackfillAccepted,
    responses=documented(404),
)
async def backfill_schedule(
    schedule_id: str, body: ScheduleBackfillCreate, user: CurrentUser, service: ServiceDep
) -> ScheduleBackfillAccepted:
    """Start the runs of every fire time from `start` to `end` (both included), now."""
    return await service.schedules.backfill(schedule_id, body, user)


@router.delete("/{schedule_id}", status_code=status.HTTP_204_NO_CONTENT, responses=documented(404))
async def delete_schedule(schedule_id: str, user: CurrentUser, service: ServiceDep) -> Response:
    """Delete the schedule; runs it started carry on and stay listed."""
    await service.schedules.delete(schedule_id, user)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{schedule_id}/runs", response_model=RunList, responses=documented(404))
async def list_schedule_runs(
    schedule_id: str,
    user: CurrentUser,
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> RunList:
    """Runs the schedule started, newest first; they outlive the schedule. With none, an
    unknown schedule (or another tenant's) answers 404."""
    runs = await service.schedules.runs(
        schedule_id, user, limit=limit, before=decode_cursor(cursor) if cursor else None
    )
    next_cursor = encode_cursor(runs[-1].created_at, runs[-1].id) if len(runs) == limit else None
    totals = await service.run_list.tree_usage(user, runs)
    listed = [
        RunPublic.from_record(r).model_copy(
            update={"total_usage": tree_usage_public(totals.get(r.id))}
        )
        for r in runs
    ]
    return RunList(runs=listed, next_cursor=next_cursor)
