"""Schedules as clients create, change, trigger, backfill and see them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from keel.api.core.schedules.fields import CronText, TimeZoneName, WebhookUrl
from keel.api.core.schemas.common import InputText, StoredText

OverlapPolicy = Literal["skip", "buffer_one", "cancel_other", "allow_all"]
"""What a schedule does when it fires while its last run still runs."""


BackfillOverlap = Literal["skip", "buffer_one", "buffer_all", "cancel_other", "allow_all"]
"""Overlap for one trigger or backfill; `buffer_all` runs them one after another."""


SCHEDULE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class ScheduleCreate(BaseModel):
    """A schedule that starts runs of an agent, on cron expressions or an interval."""

    model_config = ConfigDict(extra="forbid")

    schedule_id: str | None = Field(
        default=None,
        pattern=SCHEDULE_ID_PATTERN,
        description="Choose the id; by default `sch-` and 12 hex digits.",
    )
    agent: StoredText = Field(min_length=1, max_length=64, description="Agent definition name.")
    input: InputText = Field(description="The task each run is given.")
    workspace: StoredText = Field(
        min_length=1, max_length=4096, description="Directory the runs work on (inside the root)."
    )
    model: StoredText | None = Field(
        default=None, max_length=200, description="Overrides the agent's model."
    )
    cron_expressions: list[CronText] = Field(
        default_factory=list,
        max_length=20,
        description="Five-field cron expressions in `time_zone`; give these or `interval_s`.",
    )
    interval_s: int | None = Field(
        default=None, ge=1, le=366 * 86_400, description="Fire every this many seconds."
    )
    interval_offset_s: int = Field(
        default=0, ge=0, le=366 * 86_400, description="Shift interval fire times by this much."
    )
    time_zone: TimeZoneName = Field(default="UTC", description="IANA zone of the cron times.")
    jitter_s: int = Field(
        default=0, ge=0, le=86_400, description="Delay each fire by a random 0..jitter_s seconds."
    )
    overlap: OverlapPolicy = Field(
        default="skip", description="What to do when it fires while its last run still runs."
    )
    catchup_window_s: int = Field(
        default=3600,
        ge=10,
        le=366 * 86_400,
        description="After an outage, fire times missed by up to this much still run.",
    )
    paused: bool = Field(default=False, description="Create it paused.")
    note: StoredText | None = Field(
        default=None, max_length=1000, description="Why it is paused, or anything else."
    )
    approver: StoredText | None = Field(
        default=None,
        pattern=r"^user:[^\s]{1,200}$",
        description="Who decides its runs' approval requests (`user:ID`), with the creator.",
    )
    approval_expires_after_s: int | None = Field(
        default=None, ge=1, le=90 * 86_400, description="How long approval requests wait."
    )
    webhook_url: WebhookUrl | None = Field(
        default=None,
        description="Receives a signed POST when a run waits for approval and when it ends.",
    )
    max_total_tokens: int | None = Field(
        default=None,
        ge=1000,
        le=10_000_000_000,
        description="A ceiling on the tokens of each run and its sub-agents (the agent's "
        "own, if lower, still holds).",
    )
    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        le=1_000_000,
        description="A ceiling in US dollars on each run and its sub-agents (the agent's "
        "own, if lower, still holds).",
    )


class ScheduleUpdate(BaseModel):
    """Change a schedule: only the fields given change; `null` clears an optional one.

    Giving `cron_expressions` drops the interval and giving `interval_s` drops the
    cron expressions. Runs already started keep what they started with.
    """

    model_config = ConfigDict(extra="forbid")

    agent: StoredText | None = Field(default=None, min_length=1, max_length=64)
    input: InputText | None = None
    workspace: StoredText | None = Field(default=None, min_length=1, max_length=4096)
    model: StoredText | None = Field(default=None, max_length=200)
    cron_expressions: list[CronText] | None = Field(default=None, max_length=20)
    interval_s: int | None = Field(default=None, ge=1, le=366 * 86_400)
    interval_offset_s: int | None = Field(default=None, ge=0, le=366 * 86_400)
    time_zone: TimeZoneName | None = None
    jitter_s: int | None = Field(default=None, ge=0, le=86_400)
    overlap: OverlapPolicy | None = None
    catchup_window_s: int | None = Field(default=None, ge=10, le=366 * 86_400)
    approver: StoredText | None = Field(default=None, pattern=r"^user:[^\s]{1,200}$")
    approval_expires_after_s: int | None = Field(default=None, ge=1, le=90 * 86_400)
    webhook_url: WebhookUrl | None = None
    max_total_tokens: int | None = Field(default=None, ge=1000, le=10_000_000_000)
    max_cost_usd: float | None = Field(default=None, gt=0, le=1_000_000)


class ScheduledRunPublic(BaseModel):
    """A run a schedule started."""

    run_id: str
    scheduled_at: datetime = Field(description="The fire time it was started for (with jitter).")
    started_at: datetime


class SchedulePublic(BaseModel):
    """A schedule as clients see it: what it starts, when, and what it started."""

    id: str
    agent: str
    input: str
    workspace: str
    model: str
    cron_expressions: list[str]
    interval_s: int | None
    interval_offset_s: int
    time_zone: str
    jitter_s: int
    overlap: OverlapPolicy
    catchup_window_s: int
    paused: bool
    note: str | None
    approver: str | None
    approval_expires_after_s: int | None
    webhook_url: str | None
    max_total_tokens: int | None = Field(
        default=None, description="The token ceiling its runs start with (`budget`)."
    )
    max_cost_usd: float | None = Field(
        default=None, description="The ceiling in US dollars its runs start with (`budget`)."
    )
    created_by: str
    created_at: datetime
    updated_at: datetime | None
    next_fire_times: list[datetime] = Field(description="Next fire times, as Temporal has them.")
    recent_runs: list[ScheduledRunPublic] = Field(description="Latest runs started, oldest first.")
    running_runs: list[str] = Field(description="Runs it started that are still going.")
    runs_started: int
    skipped_overlap: int = Field(description="Fire times skipped because a run was still going.")
    missed_catchup_window: int = Field(description="Fire times missed by more than the window.")


class ScheduleList(BaseModel):
    schedules: list[SchedulePublic]
    next_cursor: str | None = Field(description="Pass as `after` for the next page.")


class ScheduleNoteCreate(BaseModel):
    """Pause or unpause a schedule, saying why."""

    model_config = ConfigDict(extra="forbid")

    note: StoredText | None = Field(default=None, max_length=1000)


class ScheduleTriggerCreate(BaseModel):
    """Start a run now."""

    model_config = ConfigDict(extra="forbid")

    overlap: BackfillOverlap | None = Field(
        default=None, description="Overrides the schedule's overlap policy for this run."
    )


class ScheduleTriggered(BaseModel):
    schedule_id: str
    run_id: str | None = Field(description="The run it started, once Temporal has started it.")
    skipped: bool = Field(description="True when the overlap policy skipped it.")


class ScheduleBackfillCreate(BaseModel):
    """Start the runs the schedule would have started between two times (both included)."""

    model_config = ConfigDict(extra="forbid")

    start: AwareDatetime
    end: AwareDatetime
    overlap: BackfillOverlap = Field(
        default="buffer_all", description="`buffer_all` runs them one after another."
    )


class ScheduleBackfillAccepted(BaseModel):
    schedule_id: str
    fire_times: int = Field(description="How many runs the backfill starts.")
    first: datetime | None
    last: datetime | None
