"""Keel schedules in Temporal's terms: the `Schedule` a request becomes, and back again.

A schedule lives only in Temporal. Its memo records whose it is (set once, at
creation); its action carries the `RunInput` of every run it starts; its spec
carries each cron expression as the comment of the calendar Keel parsed it into,
so the expression reads back as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field, ValidationError
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleCalendarSpec,
    ScheduleDescription,
    ScheduleIntervalSpec,
    ScheduleListDescription,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleRange,
    ScheduleSpec,
    ScheduleState,
)

from keel.api.core.schedules.cron import CronExpression, interval_fire_times
from keel.api.core.schedules.schemas import (
    BackfillOverlap,
    OverlapPolicy,
    ScheduleCreate,
    ScheduledRunPublic,
    SchedulePublic,
)
from keel.api.core.tenant_ids import SCOPE, in_view
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.fair_share import tenant_priority
from keel.workflows.run.models import RunInput
from keel.workflows.run.run_visibility import run_memo, run_search_attributes

MEMO_KEY = "keel"
OVERLAP_POLICIES: dict[BackfillOverlap, ScheduleOverlapPolicy] = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "buffer_one": ScheduleOverlapPolicy.BUFFER_ONE,
    "buffer_all": ScheduleOverlapPolicy.BUFFER_ALL,
    "cancel_other": ScheduleOverlapPolicy.CANCEL_OTHER,
    "allow_all": ScheduleOverlapPolicy.ALLOW_ALL,
}
OVERLAP_NAMES: dict[ScheduleOverlapPolicy, OverlapPolicy] = {
    ScheduleOverlapPolicy.SKIP: "skip",
    ScheduleOverlapPolicy.BUFFER_ONE: "buffer_one",
    ScheduleOverlapPolicy.CANCEL_OTHER: "cancel_other",
    ScheduleOverlapPolicy.ALLOW_ALL: "allow_all",
}
# Temporal's own default when a schedule names none.
DEFAULT_CATCHUP = timedelta(days=365)


class ScheduleOwner(BaseModel):
    """The schedule's memo: whose it is, fixed at creation."""

    tenant_id: str
    created_by: str
    roles: list[str] = Field(default_factory=list)
    """The creator's roles when they created it: its runs use agents as the creator."""


@dataclass
class StoredSchedule:
    """A Keel schedule as Temporal describes it."""

    id: str
    owner: ScheduleOwner
    config: ScheduleCreate
    run: RunInput
    description: ScheduleDescription


def run_workflow_id(schedule_id: str) -> str:
    """The workflow id prefix of the runs a schedule starts (Temporal appends the time).

    A schedule kept under a scoped key (`TENANT~ID`) starts runs under scoped keys too
    (`TENANT~run-ID-...`), so its tenant sees them as `run-ID-...` like any other.
    """
    tenant, scope, chosen = schedule_id.rpartition(SCOPE)
    return f"{tenant}{scope}run-{chosen}"


def temporal_schedule(config: ScheduleCreate, run: RunInput, task_queue: str) -> Schedule:
    """The Temporal schedule for a checked configuration (with its id set)."""
    assert config.schedule_id is not None
    interval = (
        [
            ScheduleIntervalSpec(
                every=timedelta(seconds=config.interval_s),
                offset=timedelta(seconds=config.interval_offset_s) or None,
            )
        ]
        if config.interval_s
        else []
    )
    return Schedule(
        action=ScheduleActionStartWorkflow(
            AgentRunWorkflow.run,
            run,
            id=run_workflow_id(config.schedule_id),
            task_queue=task_queue,
            typed_search_attributes=run_search_attributes(run, schedule_id=config.schedule_id),
            memo=run_memo(run),
            priority=tenant_priority(run.tenant_id),  # fair shares between tenants
        ),
        spec=ScheduleSpec(
            calendars=[_calendar(CronExpression.parse(c)) for c in config.cron_expressions],
            intervals=interval,
            time_zone_name=config.time_zone,
            jitter=timedelta(seconds=config.jitter_s) or None,
        ),
        policy=SchedulePolicy(
            overlap=OVERLAP_POLICIES[config.overlap],
            catchup_window=timedelta(seconds=config.catchup_window_s),
        ),
        state=ScheduleState(paused=config.paused, note=config.note),
    )


async def owner_of(entry: ScheduleDescription | ScheduleListDescription) -> ScheduleOwner | None:
    """Whose schedule this is; None for schedules Keel did not make."""
    try:
        return ScheduleOwner.model_validate(await entry.memo_value(MEMO_KEY, None))
    except ValidationError:
        return None


async def read_schedule(
    client: Client, description: ScheduleDescription, owner: ScheduleOwner
) -> StoredSchedule:
    schedule = description.schedule
    action = schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    [run] = await client.data_converter.decode(list(action.args), [RunInput])
    assert isinstance(run, RunInput)
    spec, policy, state = schedule.spec, schedule.policy, schedule.state
    interval = spec.intervals[0] if spec.intervals else None
    catchup = policy.catchup_window or DEFAULT_CATCHUP
    config = ScheduleCreate(
        schedule_id=in_view(owner.tenant_id, description.id),
        agent=run.agent.name,
        input=run.input,
        workspace=run.workspace,
        model=run.model,
        cron_expressions=[c.comment for c in spec.calendars if c.comment]
        + list(spec.cron_expressions),
        interval_s=int(interval.every.total_seconds()) if interval else None,
        interval_offset_s=int(interval.offset.total_seconds())
        if interval and interval.offset
        else 0,
        time_zone=spec.time_zone_name or "UTC",
        jitter_s=int(spec.jitter.total_seconds()) if spec.jitter else 0,
        overlap=OVERLAP_NAMES.get(policy.overlap, "skip"),
        catchup_window_s=min(int(catchup.total_seconds()), 366 * 86_400),
        paused=state.paused,
        note=state.note,
        approver=run.approver,
        approval_expires_after_s=run.approval_expires_after_s,
        webhook_url=run.webhook_url,
        # The ceilings its runs start with: the schedule's, or the agent file's if lower.
        max_total_tokens=run.agent.limits.max_total_tokens,
        max_cost_usd=run.agent.limits.max_cost_usd,
    )
    return StoredSchedule(
        id=description.id, owner=owner, config=config, run=run, description=description
    )


def public(stored: StoredSchedule) -> SchedulePublic:
    config, info = stored.config, stored.description.info
    tenant = stored.owner.tenant_id  # ids as the tenant knows them (`api.core.tenant_ids`)
    return SchedulePublic(
        id=in_view(tenant, stored.id),
        agent=config.agent,
        input=config.input,
        workspace=config.workspace,
        model=stored.run.model,
        cron_expressions=config.cron_expressions,
        interval_s=config.interval_s,
        interval_offset_s=config.interval_offset_s,
        time_zone=config.time_zone,
        jitter_s=config.jitter_s,
        overlap=config.overlap,
        catchup_window_s=config.catchup_window_s,
        paused=config.paused,
        note=config.note,
        approver=config.approver,
        approval_expires_after_s=config.approval_expires_after_s,
        webhook_url=config.webhook_url,
        max_total_tokens=config.max_total_tokens,
        max_cost_usd=config.max_cost_usd,
        created_by=stored.owner.created_by,
        created_at=info.created_at,
        updated_at=info.last_updated_at,
        next_fire_times=list(info.next_action_times),
        recent_runs=[
            ScheduledRunPublic(
                run_id=in_view(tenant, result.action.workflow_id),
                scheduled_at=result.scheduled_at,
                started_at=result.started_at,
            )
            for result in info.recent_actions
            if isinstance(result.action, ScheduleActionExecutionStartWorkflow)
        ],
        running_runs=[
            in_view(tenant, running.workflow_id)
            for running in info.running_actions
            if isinstance(running, ScheduleActionExecutionStartWorkflow)
        ],
        runs_started=info.num_actions,
        skipped_overlap=info.num_actions_skipped_overlap,
        missed_catchup_window=info.num_actions_missed_catchup_window,
    )


def fire_times(
    config: ScheduleCreate,
    start: datetime,
    *,
    end: datetime | None = None,
    limit: int = 10,
    include_start: bool = False,
) -> list[datetime]:
    """When the schedule fires after `start` (UTC, jitter aside), as Temporal computes it."""
    found: set[datetime] = set()
    if config.interval_s:
        found.update(
            interval_fire_times(
                config.interval_s,
                config.interval_offset_s,
                start,
                end=end,
                limit=limit,
                include_start=include_start,
            )
        )
    zone = ZoneInfo(config.time_zone)
    for text in config.cron_expressions:
        found.update(
            CronExpression.parse(text).fire_times(
                zone, start, end=end, limit=limit, include_start=include_start
            )
        )
    return sorted(found)[:limit]


def _calendar(expression: CronExpression) -> ScheduleCalendarSpec:
    return ScheduleCalendarSpec(
        second=(ScheduleRange(0),),
        minute=_ranges(expression.minutes),
        hour=_ranges(expression.hours),
        day_of_month=_ranges(expression.days),
        month=_ranges(expression.months),
        day_of_week=_ranges(expression.weekdays),
        comment=expression.text,
    )


def _ranges(values: tuple[int, ...]) -> tuple[ScheduleRange, ...]:
    """Sorted values as the fewest runs of consecutive numbers."""
    ranges: list[ScheduleRange] = []
    start = previous = values[0]
    for value in values[1:]:
        if value != previous + 1:
            ranges.append(ScheduleRange(start, previous))
            start = value
        previous = value
    ranges.append(ScheduleRange(start, previous))
    return tuple(ranges)
