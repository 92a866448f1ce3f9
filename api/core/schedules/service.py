"""Schedules: agent runs on Temporal Schedules, scoped to the caller's tenant.

Temporal keeps the schedules and fires them through restarts; this part checks
requests, translates them (see `keel.api.core.schedules.specs`), and keeps tenants apart: a
schedule's memo names its tenant, and another tenant's schedule is not found. Each run a
schedule starts gets the workflow input `RunService.template` makes for any run.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any
from urllib.parse import urlsplit

from pydantic import JsonValue, ValidationError
from temporalio.client import (
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleBackfill,
    ScheduleDescription,
    ScheduleUpdateInput,
)
from temporalio.client import ScheduleUpdate as TemporalScheduleUpdate
from temporalio.service import RPCError, RPCStatusCode

from keel.activities.store.audit import AuditEntry
from keel.activities.store.records import RunRecord
from keel.api.core.context import CoreParts
from keel.api.core.errors import Conflict, Invalid, NotFound, known_id
from keel.api.core.run_orders import RunOrder
from keel.api.core.runs import RunService
from keel.api.core.schedules.schemas import (
    BackfillOverlap,
    ScheduleBackfillAccepted,
    ScheduleBackfillCreate,
    ScheduleCreate,
    ScheduleList,
    SchedulePublic,
    ScheduleTriggered,
    ScheduleUpdate,
)
from keel.api.core.schedules.specs import (
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
from keel.api.core.temporal_errors import (
    namespace_missing,
    search_attributes_missing,
    temporal_refusals,
)
from keel.api.core.tenant_ids import in_view, scoped
from keel.api.core.webhook_guard import check_webhook
from keel.api.identity.auth import Principal
from keel.api.identity.config import user_ref
from keel.workflows.run.models import RunInput

MAX_BACKFILL_RUNS = 500
# How long `trigger` waits to learn the id of the run it started.
TRIGGER_POLLS = 50
TRIGGER_POLL_S = 0.1
# Describes in flight at once while listing.
LIST_CONCURRENCY = 8


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


def _the_request_at_fault(err: RPCError) -> bool:
    """Temporal refused what the schedule says, not the namespace Keel keeps it in."""
    return err.status == RPCStatusCode.INVALID_ARGUMENT and not search_attributes_missing(err)


def _refused_by_temporal(err: RPCError) -> Invalid:
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
    return Invalid(f"Temporal refused the schedule: {message}", field=field)


@temporal_refusals("manage the schedule")
class ScheduleService:
    """Create, read, change, pause, fire and delete the caller's tenant's schedules."""

    def __init__(self, parts: CoreParts, runs: RunService) -> None:
        self._parts = parts
        self._runs = runs

    async def _checked(self, config: ScheduleCreate, user: Principal) -> ScheduleCreate:
        """What Temporal cannot check, checked: the configuration with its workspace
        resolved; `Invalid` naming the field at fault if not."""
        if bool(config.cron_expressions) == (config.interval_s is not None):
            raise Invalid(
                "Give either cron_expressions or interval_s: one says when the schedule fires.",
                field="cron_expressions",
            )
        self._runs.agent(config.agent)
        workspace = await self._runs.workspace(config.workspace, user)
        return config.model_copy(update={"workspace": str(workspace)})

    async def _scheduled_run(self, config: ScheduleCreate, owner: ScheduleOwner) -> RunInput:
        """What every run of the schedule starts with; its id is the one Temporal gives it."""
        assert config.schedule_id is not None
        creator = Principal(
            tenant_id=owner.tenant_id,
            subject=owner.created_by.removeprefix("user:"),
            roles=list(owner.roles),
        )
        order = RunOrder.of(
            agent=config.agent,
            input=config.input,
            workspace=config.workspace,
            trigger="schedule",
            model=config.model,
            approver=config.approver,
            approval_expires_after_s=config.approval_expires_after_s,
            webhook_url=config.webhook_url,
            max_total_tokens=config.max_total_tokens,
            max_cost_usd=config.max_cost_usd,
        )
        run = await self._runs.template(order, creator, schedule_id=config.schedule_id)
        # Checked again as each run starts: the agent file may have changed since.
        return run.model_copy(update={"acting_roles": list(owner.roles)})

    async def _audit(
        self, user: Principal, action: str, schedule_id: str, **detail: JsonValue
    ) -> None:
        await self._parts.audit.log.append(
            AuditEntry(
                tenant_id=user.tenant_id,
                actor=user.subject,
                category="schedule",
                action=action,
                subject=schedule_id,
                detail=detail,
            )
        )

    async def _find(self, schedule_id: str, user: Principal) -> ScheduleDescription | None:
        """The schedule `schedule_id` names for the caller: its own under the scoped key
        first (`api.core.tenant_ids`), then the id's (of whichever tenant)."""
        known_id(schedule_id, "schedule")
        for key in (scoped(user.tenant_id, schedule_id), schedule_id):
            try:
                return await self._parts.temporal.get_schedule_handle(key).describe()
            except RPCError as err:
                # An id Temporal cannot even parse names no schedule either.
                if namespace_missing(err) or err.status not in (
                    RPCStatusCode.NOT_FOUND,
                    RPCStatusCode.INVALID_ARGUMENT,
                ):
                    raise
        return None

    async def get(self, schedule_id: str, user: Principal) -> StoredSchedule:
        """The schedule, if the caller's tenant owns it; `NotFound` otherwise (audited
        across tenants)."""
        temporal = self._parts.temporal
        description = await self._find(schedule_id, user)
        if description is None:
            raise NotFound(f"No schedule {schedule_id}.")
        owner = await owner_of(description)
        if owner is None or owner.tenant_id != user.tenant_id:
            if owner is not None:
                await self._parts.audit.cross_tenant(user, "schedule", schedule_id)
            raise NotFound(f"No schedule {schedule_id}.")
        return await read_schedule(temporal, description, owner)

    async def create(self, body: ScheduleCreate, user: Principal) -> SchedulePublic:
        """Create a schedule; its runs are ordinary runs with trigger `schedule`."""
        temporal = self._parts.temporal
        config = await self._checked(body, user)
        await check_webhook(self._parts, config.webhook_url, user)
        await self._runs.usable_agent(config.agent, user, via="schedule")
        chosen = body.schedule_id or f"sch-{uuid.uuid4().hex[:12]}"
        owner = ScheduleOwner(
            tenant_id=user.tenant_id, created_by=user_ref(user), roles=list(user.roles)
        )
        held = await self._find(chosen, user)
        holder = await owner_of(held) if held is not None else None
        if holder is not None and holder.tenant_id == user.tenant_id:
            raise Conflict(
                f"A schedule {chosen} already exists; choose another id.", field="schedule_id"
            )
        # The id, or its scoped key when another tenant's schedule has the id.
        for schedule_id in (chosen, scoped(user.tenant_id, chosen)):
            config = config.model_copy(update={"schedule_id": schedule_id})
            run = await self._scheduled_run(config, owner)
            try:
                handle = await temporal.create_schedule(
                    schedule_id,
                    temporal_schedule(config, run, self._parts.settings.task_queue),
                    memo={MEMO_KEY: owner.model_dump()},
                )
                break
            except ScheduleAlreadyRunningError as err:
                if schedule_id != chosen:
                    raise Conflict(  # made by this tenant a moment ago
                        f"A schedule {chosen} already exists; choose another id.",
                        field="schedule_id",
                    ) from err
            except RPCError as err:
                if _the_request_at_fault(err):
                    raise _refused_by_temporal(err) from err
                raise
        await self._audit(user, "schedule.created", schedule_id, **_summary(config))
        return public(await read_schedule(temporal, await handle.describe(), owner))

    async def page(self, user: Principal, *, limit: int, after: str | None) -> ScheduleList:
        """The tenant's schedules, by id. Temporal's list is eventually consistent: a
        schedule created a moment ago may take a second to appear."""
        temporal = self._parts.temporal
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
                    if err.status == RPCStatusCode.NOT_FOUND and not namespace_missing(err):
                        return None  # deleted since the list was read
                    raise
                owner = await owner_of(description)
                assert owner is not None
                return public(await read_schedule(temporal, description, owner))

        found = await asyncio.gather(*(describe(i) for i in page))
        return ScheduleList(
            schedules=[s for s in found if s is not None], next_cursor=page[-1] if more else None
        )

    async def describe(self, schedule_id: str, user: Principal) -> SchedulePublic:
        """The schedule, its next fire times, and the runs it started lately."""
        return public(await self.get(schedule_id, user))

    async def update(
        self, schedule_id: str, body: ScheduleUpdate, user: Principal
    ) -> SchedulePublic:
        """Change what the schedule starts or when; runs already started are not touched."""
        stored = await self.get(schedule_id, user)
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
            raise InvalidConfiguration(exc) from exc
        # What Temporal keeps names the schedule by its key (`api.core.tenant_ids`).
        config = (await self._checked(config, user)).model_copy(update={"schedule_id": stored.id})
        if "webhook_url" in changes:
            await check_webhook(self._parts, config.webhook_url, user)
        await self._runs.usable_agent(config.agent, user, via="schedule")
        run = await self._scheduled_run(config, stored.owner)
        action = stored.description.schedule.action
        assert isinstance(action, ScheduleActionStartWorkflow)
        replacement = temporal_schedule(config, run, action.task_queue)

        def keep_state(current: ScheduleUpdateInput) -> TemporalScheduleUpdate:
            # Pausing has its own endpoints: an update leaves the schedule as paused as it is.
            replacement.state = current.description.schedule.state
            return TemporalScheduleUpdate(schedule=replacement)

        handle = self._parts.temporal.get_schedule_handle(stored.id)
        try:
            await handle.update(keep_state)
        except RPCError as err:
            if _the_request_at_fault(err):
                raise _refused_by_temporal(err) from err
            raise
        await self._audit(user, "schedule.updated", schedule_id, **_summary(config))
        return public(
            await read_schedule(self._parts.temporal, await handle.describe(), stored.owner)
        )

    async def pause(self, schedule_id: str, note: str | None, user: Principal) -> SchedulePublic:
        """Stop firing until unpaused; runs already going carry on."""
        return await self._set_paused(schedule_id, True, note, user)

    async def unpause(self, schedule_id: str, note: str | None, user: Principal) -> SchedulePublic:
        """Fire again from the next fire time (missed ones within the catch-up window run)."""
        return await self._set_paused(schedule_id, False, note, user)

    async def _set_paused(
        self, schedule_id: str, paused: bool, note: str | None, user: Principal
    ) -> SchedulePublic:
        stored = await self.get(schedule_id, user)
        verb = "paused" if paused else "unpaused"
        note = note or f"{verb.capitalize()} by {user_ref(user)}."
        handle = self._parts.temporal.get_schedule_handle(stored.id)
        await (handle.pause(note=note) if paused else handle.unpause(note=note))
        await self._audit(user, f"schedule.{verb}", schedule_id, note=note)
        return public(
            await read_schedule(self._parts.temporal, await handle.describe(), stored.owner)
        )

    async def trigger(
        self, schedule_id: str, overlap: BackfillOverlap | None, user: Principal
    ) -> ScheduleTriggered:
        """Start a run now, paused or not; the overlap policy still applies."""
        stored = await self.get(schedule_id, user)
        before = stored.description.info
        known = {
            r.action.workflow_id
            for r in before.recent_actions
            if isinstance(r.action, ScheduleActionExecutionStartWorkflow)
        }
        handle = self._parts.temporal.get_schedule_handle(stored.id)
        await handle.trigger(overlap=OVERLAP_POLICIES[overlap] if overlap else None)
        await self._audit(user, "schedule.triggered", schedule_id, overlap=overlap)
        for _ in range(TRIGGER_POLLS):
            info = (await handle.describe()).info
            started = [
                r.action.workflow_id
                for r in sorted(info.recent_actions, key=lambda r: r.started_at)
                if isinstance(r.action, ScheduleActionExecutionStartWorkflow)
                and r.action.workflow_id not in known
            ]
            if info.num_actions > before.num_actions and started:
                shown = in_view(user.tenant_id, started[-1])
                return ScheduleTriggered(schedule_id=schedule_id, run_id=shown, skipped=False)
            if info.num_actions_skipped_overlap > before.num_actions_skipped_overlap:
                return ScheduleTriggered(schedule_id=schedule_id, run_id=None, skipped=True)
            await asyncio.sleep(TRIGGER_POLL_S)
        return ScheduleTriggered(schedule_id=schedule_id, run_id=None, skipped=False)

    async def backfill(
        self, schedule_id: str, body: ScheduleBackfillCreate, user: Principal
    ) -> ScheduleBackfillAccepted:
        """Start the runs of every fire time from `start` to `end` (both included), now."""
        stored = await self.get(schedule_id, user)
        if body.end <= body.start:
            raise Invalid("The end of a backfill must come after its start.", field="end")
        times = fire_times(
            stored.config, body.start, end=body.end, limit=MAX_BACKFILL_RUNS + 1, include_start=True
        )
        if not times:
            raise Invalid(
                f"Schedule {schedule_id} has no fire time from start to end; nothing to backfill.",
                field="start",
            )
        if len(times) > MAX_BACKFILL_RUNS:
            raise Invalid(
                f"That range holds more than {MAX_BACKFILL_RUNS} fire times; backfill a shorter "
                "range, or several one after another.",
                field="end",
            )
        await self._parts.temporal.get_schedule_handle(stored.id).backfill(
            ScheduleBackfill(
                start_at=body.start, end_at=body.end, overlap=OVERLAP_POLICIES[body.overlap]
            )
        )
        await self._audit(
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

    async def delete(self, schedule_id: str, user: Principal) -> None:
        """Delete the schedule; runs it started carry on and stay listed."""
        stored = await self.get(schedule_id, user)
        try:
            await self._parts.temporal.get_schedule_handle(stored.id).delete()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND and not namespace_missing(err):
                raise NotFound(f"No schedule {schedule_id}.") from err
            raise
        await self._audit(user, "schedule.deleted", schedule_id)

    async def runs(
        self,
        schedule_id: str,
        user: Principal,
        *,
        limit: int,
        before: tuple[Any, str] | None,
    ) -> list[RunRecord]:
        """Runs the schedule started, newest first; they outlive the schedule. With none
        (of this tenant's), the schedule must exist and be the caller's: another tenant's
        id answers `NotFound` like an unknown one, not an empty list."""
        runs = await self._runs.page(user, limit=limit, before=before, schedule_id=schedule_id)
        if not runs and before is None:
            await self.get(schedule_id, user)
        return runs


class InvalidConfiguration(Invalid):
    """A changed configuration that no longer validates: pydantic's errors, each named."""

    def __init__(self, exc: ValidationError) -> None:
        problems = [
            {"loc": ["body", *e["loc"]], "msg": e["msg"], "type": e["type"]} for e in exc.errors()
        ]
        first = problems[0] if problems else {"loc": ["body"], "msg": str(exc)}
        super().__init__(
            str(first["msg"]),
            field=".".join(str(p) for p in first["loc"][1:]) or None,
            problems=problems,
        )
