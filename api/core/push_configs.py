"""A2A push notification configs: where a task's updates go, set by its clients.

A config belongs to a task (a run) of the caller's tenant; another tenant's task is
"no such task", audited, as for every read. Its URL is checked as a webhook URL is
(http or https, with a host). Deliveries are Keel's webhook deliveries: signed with the
tenant's secret, retried for days, sent when the run waits for a person and when it
finishes (`activities/a2a/push.py` for the body).
"""

from __future__ import annotations

from pydantic import BaseModel, Field, ValidationError

from keel.activities.store.push_config_store import (
    MAX_CONFIGS_PER_TASK,
    NewPushConfig,
    PushConfigRecord,
    PushConfigStore,
)
from keel.api.core.context import CoreParts
from keel.api.core.errors import Conflict, NotFound, invalid_request, known_id
from keel.api.core.runs import RunService
from keel.api.core.schedules.fields import WebhookUrl
from keel.api.core.webhook_guard import check_webhook
from keel.api.identity.auth import Principal

# A scheme is one HTTP auth-scheme token (`Bearer`, `Basic`); credentials stay on one line.
AUTH_SCHEME = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$"
ONE_LINE = r"^[^\r\n]*$"


class PushConfigOrder(BaseModel):
    """A config as a client asks for it (build it with `of`, which says what is wrong)."""

    config_id: str | None = Field(default=None, min_length=1, max_length=200)
    url: WebhookUrl
    token: str | None = Field(default=None, max_length=4096, pattern=ONE_LINE)
    auth_scheme: str | None = Field(default=None, pattern=AUTH_SCHEME)
    auth_credentials: str | None = Field(default=None, max_length=8192, pattern=ONE_LINE)

    @classmethod
    def of(cls, **fields: object) -> PushConfigOrder:
        try:
            return cls.model_validate(fields)
        except ValidationError as exc:
            raise invalid_request(exc) from exc

    def stored(self, task_id: str, tenant_id: str) -> NewPushConfig:
        return NewPushConfig(
            task_id=task_id,
            # Without an id, the task's own, as the a2a-sdk's stores name it.
            id=known_id(self.config_id or task_id, "config"),
            tenant_id=tenant_id,
            url=self.url,
            token=self.token,
            auth_scheme=self.auth_scheme,
            auth_credentials=self.auth_credentials,
        )


class PushConfigService:
    def __init__(self, parts: CoreParts, runs: RunService) -> None:
        self._parts = parts
        self._runs = runs
        self._store = PushConfigStore(parts.store.pool)

    async def set(self, task_id: str, order: PushConfigOrder, user: Principal) -> PushConfigRecord:
        """Create the config, or replace the one with the same id. A task that has ended
        keeps it too, and simply sends no more updates."""
        run = await self._runs.get(task_id, user, allow_admin=False)
        await check_webhook(self._parts, order.url, user, field="url")
        config = order.stored(run.id, run.tenant_id)
        existing = await self._store.for_task(run.id)
        if config.id not in {c.id for c in existing} and len(existing) >= MAX_CONFIGS_PER_TASK:
            raise Conflict(
                f"Task {task_id} has {MAX_CONFIGS_PER_TASK} push notification configs already; "
                "delete one first."
            )
        return await self._store.put(config)

    async def set_for_new_task(
        self, task_id: str, order: PushConfigOrder, user: Principal
    ) -> PushConfigRecord:
        """The config of a task the caller's request is about to start (`task_id` is the
        fresh run id it will start with), stored first so no update of it is missed."""
        await check_webhook(self._parts, order.url, user, field="url")
        return await self._store.put(order.stored(task_id, user.tenant_id))

    async def forget(self, task_id: str, config_id: str) -> None:
        """Drop a config stored for a task that then did not start."""
        await self._store.delete(task_id, config_id)

    async def get(self, task_id: str, config_id: str, user: Principal) -> PushConfigRecord:
        run = await self._runs.get(task_id, user, allow_admin=False)
        found = await self._store.get(run.id, config_id)
        if found is None:
            raise NotFound(f"Task {task_id} has no push notification config {config_id}.")
        return found

    async def configs(self, task_id: str, user: Principal) -> list[PushConfigRecord]:
        run = await self._runs.get(task_id, user, allow_admin=False)
        return await self._store.for_task(run.id)

    async def delete(self, task_id: str, config_id: str, user: Principal) -> None:
        """Gone afterwards, whether it was there or not: a repeated delete is no error."""
        run = await self._runs.get(task_id, user, allow_admin=False)
        await self._store.delete(run.id, config_id)
