"""Retention as admins reach it: read and set tenants' policies, sweep now.

The sweep itself runs on a Temporal Schedule (`keel-retention`, every
`KEEL_RETENTION_SWEEP_INTERVAL_S`), made here the first time a policy is set (and
brought to the current settings whenever one is set or a sweep asked for), so a Keel
whose admins never set one has no schedule and removes nothing. Only admins
(`keel:admin`) may use any of it; a refusal is audited.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
)

from keel.activities.store.retention_store import RetentionPolicy, RetentionStore
from keel.api.core.context import CoreParts
from keel.api.core.errors import Forbidden, NotFound
from keel.api.core.temporal_errors import temporal_refusals
from keel.api.identity.auth import Principal
from keel.api.identity.config import user_ref
from keel.workflows.retention.models import RetentionSweep
from keel.workflows.retention.workflow import RetentionWorkflow

RETENTION_SCHEDULE_ID = "keel-retention"
SWEEP_WORKFLOW_ID = "keel-retention-sweep"


@temporal_refusals("keep the retention schedule")
class RetentionService:
    """Policies in Postgres, sweeps on a Temporal Schedule."""

    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts
        self._store = RetentionStore(parts.store.pool)

    async def policies(self, user: Principal) -> list[RetentionPolicy]:
        await self._admin(user, "read")
        return await self._store.policies()

    async def policy(self, tenant_id: str, user: Principal) -> RetentionPolicy:
        await self._admin(user, "read")
        policy = await self._store.policy(tenant_id)
        if policy is None:
            raise NotFound(
                f"Tenant {tenant_id} has no retention policy: its runs are kept until one is set."
            )
        return policy

    async def set(self, tenant_id: str, days: int, user: Principal) -> RetentionPolicy:
        """Keep the tenant's finished runs' contents `days` days; the sweep applies it."""
        await self._admin(user, "set")
        policy = await self._store.set_policy(tenant_id, days, user_ref(user))
        await self._ensure_schedule()
        return policy

    async def clear(self, tenant_id: str, user: Principal) -> None:
        await self._admin(user, "clear")
        if not await self._store.clear_policy(tenant_id, user_ref(user)):
            raise NotFound(f"Tenant {tenant_id} has no retention policy.")

    async def sweep_now(self, user: Principal) -> str:
        """Fire the retention schedule now; returns its id."""
        await self._admin(user, "sweep")
        await self._ensure_schedule()
        await self._parts.temporal.get_schedule_handle(RETENTION_SCHEDULE_ID).trigger(
            overlap=ScheduleOverlapPolicy.SKIP
        )
        return RETENTION_SCHEDULE_ID

    async def _admin(self, user: Principal, action: str) -> None:
        if not user.is_admin:
            await self._parts.audit.admin_refused(user, f"retention.{action}", "retention")
            raise Forbidden("Retention is for admins: it needs the keel:admin scope.")

    async def _ensure_schedule(self) -> None:
        settings = self._parts.settings
        schedule = Schedule(
            action=ScheduleActionStartWorkflow(
                RetentionWorkflow.run,
                RetentionSweep(),
                id=SWEEP_WORKFLOW_ID,
                task_queue=settings.task_queue,
            ),
            spec=ScheduleSpec(
                intervals=[
                    ScheduleIntervalSpec(
                        every=timedelta(seconds=settings.retention_sweep_interval_s)
                    )
                ]
            ),
            # A sweep still going when the next is due finishes it; the next is skipped.
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
        )
        temporal = self._parts.temporal
        try:
            await temporal.create_schedule(RETENTION_SCHEDULE_ID, schedule)
        except ScheduleAlreadyRunningError:
            # Made by an earlier policy or another replica: bring it to these settings
            # (task queue, interval), so sweeps never go to a queue no worker polls.
            await temporal.get_schedule_handle(RETENTION_SCHEDULE_ID).update(
                lambda _: ScheduleUpdate(schedule=schedule)
            )
