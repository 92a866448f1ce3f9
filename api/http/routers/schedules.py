"""/v1/schedules: agent runs on Temporal Schedules, scoped to the caller's tenant.

Temporal keeps the schedules and fires them through restarts; this router checks
requests, translates them (see `api.core.schedule_specs`), and keeps tenants apart: a
schedule's memo names its tenant, and another tenant's schedule answers 404.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Body, HTTPException, Query, Response, status
from pydantic import JsonValue, ValidationError
from temporalio.client import (
    Client,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleBackfill,
    ScheduleUpdateInput,
)
from temporalio.client import ScheduleUpdate as TemporalScheduleUpdate
from temporalio.service import RPCError, RPCStatusCode

from activities.store.audit import AuditEntry
from api.core.audit_trail import ApiAudit
from api.core.page_cursor import decode_cursor, encode_cursor
from api.core.run_factory import find_agent, resolve_workspace, run_input
from api.core.schedule_specs import (
    MEMO_KEY,
    OVERLAP_POLICIES,
    ScheduleOwner,
    StoredSchedule,
    fire_times,
    owner_of,
    public,
    read_schedule,
    temporal_schedule,
)
from api.core.schemas import (
    RunList,
    RunPublic,
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
from api.http.deps import (
    AuditDep,
    CatalogDep,
    CurrentUser,
    SettingsDep,
    StoreDep,
    TemporalDep,
)
from api.http.errors import AUTHENTICATED, documented, problem
from api.identity.auth import Principal
from api.identity.config import user_ref
from worker.agent_catalog import AgentCatalog
from worker.settings import Settings
from workflows.models import AgentSpec, RunInput

router = APIRouter(prefix="/v1/schedules", tags=["schedules"], responses=AUTHENTICATED)

MAX_BACKFILL_RUNS = 500
# How long `trigger` waits to learn the id of the run it started.
TRIGGER_POLLS = 50
TRIGGER_POLL_S = 0.1
# Describes in flight at once while listing.
LIST_CONCURRENCY = 8


def _checked(
    config: ScheduleCreate, catalog: AgentCatalog, settings: Settings
) -> tuple[ScheduleCreate, AgentSpec]:
    """What Temporal cannot check, checked: the configuration with its workspace resolved,
    and its agent; 422 naming the field at fault if not."""
    if bool(config.cron_expressions) == (config.interval_s is not None):
        raise problem(
            422,
            "cron_expressions",
            "Give either cron_expressions or interval_s: one says when the schedule fires.",
        )
    agent = find_agent(catalog, config.agent)
    workspace = resolve_workspace(config.workspace, settings.workspace_root)
    return config.model_copy(update={"workspace": str(workspace)}), agent


def _scheduled_run(
    config: ScheduleCreate, agent: AgentSpec, owner: ScheduleOwner, settings: Settings
) -> RunInput:
    """What every run of the schedule starts with; its id is the one Temporal gives it."""
    assert config.schedule_id is not None
    creator = Principal(tenant_id=owner.tenant_id, subject=owner.created_by.removeprefix("user:"))
    return run_input(
        run_id="",
        agent=agent,
        text=config.input,
        model=config.model or agent.model or settings.model,
        workspace=Path(config.workspace),
        user=creator,
        trigger="schedule",
        settings=settings,
        approver=config.approver,
        approval_expires_after_s=config.approval_expires_after_s,
        webhook_url=config.webhook_url,
        schedule_id=config.schedule_id,
    )


async def schedule_for(
    schedule_id: str, user: Principal, temporal: Client, audit: ApiAudit
) -> StoredSchedule:
    """The schedule, if the caller's tenant owns it; 404 otherwise (audited across tenants)."""
    try:
        description = await temporal.get_schedule_handle(schedule_id).describe()
    except RPCError as err:
        # An id Temporal cannot even parse names no schedule either.
        if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
            raise HTTPException(404, detail=f"No schedule {schedule_id}.") from err
        raise
    owner = await owner_of(description)
    if owner is None or owner.tenant_id != user.tenant_id:
        if owner is not None:
            await audit.cross_tenant(user, "schedule", schedule_id)
        raise HTTPException(404, detail=f"No schedule {schedule_id}.")
    return await read_schedule(temporal, description, owner)


async def _audit(
    audit: ApiAudit, user: Principal, action: str, schedule_id: str, **detail: JsonValue
) -> None:
    await audit.log.append(
        AuditEntry(
            tenant_id=user.tenant_id,
            actor=user.subject,
            category="schedule",
            action=action,
            subject=schedule_id,
            detail=detail,
        )
    )


def _summary(config: ScheduleCreate) -> dict[str, JsonValue]:
    """What the audit log keeps of a configuration (a webhook URL's path may hold a token)."""
    return {
        "agent": config.agent,
        "cron_expressions": list(config.cron_expressions),
        "interval_s": config.interval_s,
        "time_zone": config.time_zone,
        "overlap": config.overlap,
        "approver": config.approver,
        "webhook_host": urlsplit(config.webhook_url).netloc if config.webhook_url else None,
    }


def _refused_by_temporal(err: RPCError) -> HTTPException:
    """Keel checks before Temporal does; this names the likeliest field if Temporal disagrees."""
    message = err.message
    field = "cron_expressions"
    for word, name in (
        ("time zone", "time_zone"),
        ("interval", "interval_s"),
        ("jitter", "jitter_s"),
    ):
        if word in message.lower():
            field = name
    return problem(422, field, f"Temporal refused the schedule: {message}")


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=SchedulePublic,
    responses=documented(409),
)
async def create_schedule(
    body: ScheduleCreate,
    user: CurrentUser,
    temporal: TemporalDep,
    settings: SettingsDep,
    catalog: CatalogDep,
    audit: AuditDep,
) -> SchedulePublic:
    """Create a schedule; its runs are ordinary runs with trigger `schedule`."""
    config, agent = _checked(body, catalog, settings)
    schedule_id = body.schedule_id or f"sch-{uuid.uuid4().hex[:12]}"
    config = config.model_copy(update={"schedule_id": schedule_id})
    owner = ScheduleOwner(tenant_id=user.tenant_id, created_by=user_ref(user))
    run = _scheduled_run(config, agent, owner, settings)
    try:
        handle = await temporal.create_schedule(
            schedule_id,
            temporal_schedule(config, run, settings.task_queue),
            memo={MEMO_KEY: owner.model_dump()},
        )
    except ScheduleAlreadyRunningError as err:
        raise problem(
            409, "schedule_id", f"A schedule {schedule_id} already exists; choose another id."
        ) from err
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT:
            raise _refused_by_temporal(err) from err
        raise
    await _audit(audit, user, "schedule.created", schedule_id, **_summary(config))
    return public(await read_schedule(temporal, await handle.describe(), owner))


@router.get("", response_model=ScheduleList)
async def list_schedules(
    user: CurrentUser,
    temporal: TemporalDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    after: Annotated[str | None, Query(max_length=64)] = None,
) -> ScheduleList:
    """The tenant's schedules, by id. Temporal's list is eventually consistent: a schedule
    created a moment ago may take a second to appear."""
    ids: list[str] = []
    async for entry in await temporal.list_schedules():
        owner = await owner_of(entry)
        if owner is not None and owner.tenant_id == user.tenant_id:
            ids.append(entry.id)
    ids = sorted(i for i in ids if after is None or i > after)
    page, more = ids[:limit], len(ids) > limit
    gate = asyncio.Semaphore(LIST_CONCURRENCY)

    async def describe(schedule_id: str) -> SchedulePublic | None:
        async with gate:
            try:
                description = await temporal.get_schedule_handle(schedule_id).describe()
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    return None  # deleted since the list was read
                raise
            owner = await owner_of(description)
            assert owner is not None
            return public(await read_schedule(temporal, description, owner))

    found = await asyncio.gather(*(describe(i) for i in page))
    return ScheduleList(
        schedules=[s for s in found if s is not None], next_cursor=page[-1] if more else None
    )


@router.get("/{schedule_id}", response_model=SchedulePublic, responses=documented(404))
async def get_schedule(
    schedule_id: str, user: CurrentUser, temporal: TemporalDep, audit: AuditDep
) -> SchedulePublic:
    """The schedule, its next fire times, and the runs it started lately."""
    return public(await schedule_for(schedule_id, user, temporal, audit))


@router.patch("/{schedule_id}", response_model=SchedulePublic, responses=documented(404))
async def update_schedule(
    schedule_id: str,
    body: ScheduleUpdate,
    user: CurrentUser,
    temporal: TemporalDep,
    settings: SettingsDep,
    catalog: CatalogDep,
    audit: AuditDep,
) -> SchedulePublic:
    """Change what the schedule starts or when; runs already started are not touched."""
    stored = await schedule_for(schedule_id, user, temporal, audit)
    changes: dict[str, Any] = body.model_dump(exclude_unset=True)
    if changes.get("cron_expressions") and "interval_s" not in changes:
        changes["interval_s"] = None
    if changes.get("interval_s") is not None and "cron_expressions" not in changes:
        changes["cron_expressions"] = []
    if "cron_expressions" in changes and changes["cron_expressions"] is None:
        changes["cron_expressions"] = []
    if "agent" in changes and "model" not in changes:
        changes["model"] = None  # the new agent's own model, unless one is given
    try:
        config = ScheduleCreate.model_validate(stored.config.model_dump() | changes)
    except ValidationError as exc:
        raise HTTPException(
            422,
            detail=[
                {"loc": ["body", *e["loc"]], "msg": e["msg"], "type": e["type"]}
                for e in exc.errors()
            ],
        ) from exc
    config, agent = _checked(config, catalog, settings)
    run = _scheduled_run(config, agent, stored.owner, settings)
    action = stored.description.schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    replacement = temporal_schedule(config, run, action.task_queue)

    def keep_state(current: ScheduleUpdateInput) -> TemporalScheduleUpdate:
        # Pausing has its own endpoints: an update leaves the schedule as paused as it is.
        replacement.state = current.description.schedule.state
        return TemporalScheduleUpdate(schedule=replacement)

    handle = temporal.get_schedule_handle(schedule_id)
    try:
        await handle.update(keep_state)
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT:
            raise _refused_by_temporal(err) from err
        raise
    await _audit(audit, user, "schedule.updated", schedule_id, **_summary(config))
    return public(await read_schedule(temporal, await handle.describe(), stored.owner))


@router.post("/{schedule_id}/pause", response_model=SchedulePublic, responses=documented(404))
async def pause_schedule(
    schedule_id: str,
    user: CurrentUser,
    temporal: TemporalDep,
    audit: AuditDep,
    body: Annotated[ScheduleNoteCreate | None, Body()] = None,
) -> SchedulePublic:
    """Stop firing until unpaused; runs already going carry on."""
    stored = await schedule_for(schedule_id, user, temporal, audit)
    note = (body.note if body else None) or f"Paused by {user_ref(user)}."
    handle = temporal.get_schedule_handle(schedule_id)
    await handle.pause(note=note)
    await _audit(audit, user, "schedule.paused", schedule_id, note=note)
    return public(await read_schedule(temporal, await handle.describe(), stored.owner))


@router.post("/{schedule_id}/unpause", response_model=SchedulePublic, responses=documented(404))
async def unpause_schedule(
    schedule_id: str,
    user: CurrentUser,
    temporal: TemporalDep,
    audit: AuditDep,
    body: Annotated[ScheduleNoteCreate | None, Body()] = None,
) -> SchedulePublic:
    """Fire again from the next fire time (missed ones within the catch-up window run)."""
    stored = await schedule_for(schedule_id, user, temporal, audit)
    note = (body.note if body else None) or f"Unpaused by {user_ref(user)}."
    handle = temporal.get_schedule_handle(schedule_id)
    await handle.unpause(note=note)
    await _audit(audit, user, "schedule.unpaused", schedule_id, note=note)
    return public(await read_schedule(temporal, await handle.describe(), stored.owner))


@router.post(
    "/{schedule_id}/trigger",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=ScheduleTriggered,
    responses=documented(404),
)
async def trigger_schedule(
    schedule_id: str,
    user: CurrentUser,
    temporal: TemporalDep,
    audit: AuditDep,
    body: Annotated[ScheduleTriggerCreate | None, Body()] = None,
) -> ScheduleTriggered:
    """Start a run now, paused or not; the overlap policy still applies."""
    stored = await schedule_for(schedule_id, user, temporal, audit)
    before = stored.description.info
    known = {
        r.action.workflow_id
        for r in before.recent_actions
        if isinstance(r.action, ScheduleActionExecutionStartWorkflow)
    }
    overlap = body.overlap if body else None
    handle = temporal.get_schedule_handle(schedule_id)
    await handle.trigger(overlap=OVERLAP_POLICIES[overlap] if overlap else None)
    await _audit(audit, user, "schedule.triggered", schedule_id, overlap=overlap)
    for _ in range(TRIGGER_POLLS):
        info = (await handle.describe()).info
        started = [
            r.action.workflow_id
            for r in sorted(info.recent_actions, key=lambda r: r.started_at)
            if isinstance(r.action, ScheduleActionExecutionStartWorkflow)
            and r.action.workflow_id not in known
        ]
        if info.num_actions > before.num_actions and started:
            return ScheduleTriggered(schedule_id=schedule_id, run_id=started[-1], skipped=False)
        if info.num_actions_skipped_overlap > before.num_actions_skipped_overlap:
            return ScheduleTriggered(schedule_id=schedule_id, run_id=None, skipped=True)
        await asyncio.sleep(TRIGGER_POLL_S)
    return ScheduleTriggered(schedule_id=schedule_id, run_id=None, skipped=False)


@router.post(
    "/{schedule_id}/backfill",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=ScheduleBackfillAccepted,
    responses=documented(404),
)
async def backfill_schedule(
    schedule_id: str,
    body: ScheduleBackfillCreate,
    user: CurrentUser,
    temporal: TemporalDep,
    audit: AuditDep,
) -> ScheduleBackfillAccepted:
    """Start the runs of every fire time from `start` to `end` (both included), now."""
    stored = await schedule_for(schedule_id, user, temporal, audit)
    if body.end <= body.start:
        raise problem(422, "end", "The end of a backfill must come after its start.")
    times = fire_times(
        stored.config, body.start, end=body.end, limit=MAX_BACKFILL_RUNS + 1, include_start=True
    )
    if not times:
        raise problem(
            422,
            "start",
            f"Schedule {schedule_id} has no fire time from start to end; nothing to backfill.",
        )
    if len(times) > MAX_BACKFILL_RUNS:
        raise problem(
            422,
            "end",
            f"That range holds more than {MAX_BACKFILL_RUNS} fire times; backfill a shorter "
            "range, or several one after another.",
        )
    await temporal.get_schedule_handle(schedule_id).backfill(
        ScheduleBackfill(
            start_at=body.start, end_at=body.end, overlap=OVERLAP_POLICIES[body.overlap]
        )
    )
    await _audit(
        audit,
        user,
        "schedule.backfilled",
        schedule_id,
        start=body.start.isoformat(),
        end=body.end.isoformat(),
        fire_times=len(times),
    )
    return ScheduleBackfillAccepted(
        schedule_id=schedule_id, fire_times=len(times), first=times[0], last=times[-1]
    )


@router.delete("/{schedule_id}", status_code=status.HTTP_204_NO_CONTENT, responses=documented(404))
async def delete_schedule(
    schedule_id: str, user: CurrentUser, temporal: TemporalDep, audit: AuditDep
) -> Response:
    """Delete the schedule; runs it started carry on and stay listed."""
    await schedule_for(schedule_id, user, temporal, audit)
    try:
        await temporal.get_schedule_handle(schedule_id).delete()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise HTTPException(404, detail=f"No schedule {schedule_id}.") from err
        raise
    await _audit(audit, user, "schedule.deleted", schedule_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{schedule_id}/runs", response_model=RunList)
async def list_schedule_runs(
    schedule_id: str,
    user: CurrentUser,
    store: StoreDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> RunList:
    """Runs the schedule started, newest first; they outlive the schedule."""
    runs = await store.list_runs(
        tenant_id=user.tenant_id,
        schedule_id=schedule_id,
        limit=limit,
        before=decode_cursor(cursor) if cursor else None,
    )
    next_cursor = encode_cursor(runs[-1].created_at, runs[-1].id) if len(runs) == limit else None
    return RunList(runs=[RunPublic.from_record(r) for r in runs], next_cursor=next_cursor)
