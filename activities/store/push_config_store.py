"""A2A push notification configs in Postgres: which URLs want a task's updates."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

COLUMNS = "run_id AS task_id, id, tenant_id, url, token, auth_scheme, auth_credentials, created_at"
# A config set again under its id replaces the old one (the A2A `set` semantics).
UPSERT_PUSH_CONFIG_SQL = (
    "INSERT INTO a2a_push_configs"
    " (run_id, id, tenant_id, url, token, auth_scheme, auth_credentials)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (run_id, id) DO UPDATE SET url = EXCLUDED.url, token = EXCLUDED.token,"
    " auth_scheme = EXCLUDED.auth_scheme, auth_credentials = EXCLUDED.auth_credentials"
    " RETURNING " + COLUMNS
)
SELECT_PUSH_CONFIGS_SQL = (
    "SELECT " + COLUMNS + " FROM a2a_push_configs WHERE run_id = %s ORDER BY created_at, id"
)
DELETE_PUSH_CONFIG_SQL = "DELETE FROM a2a_push_configs WHERE run_id = %s AND id = %s"
# Bounds what one task can fan out to: each config is a delivery on every update.
MAX_CONFIGS_PER_TASK = 10


class NewPushConfig(BaseModel):
    """One push target of a task (a run), as it is stored."""

    task_id: str
    id: str
    tenant_id: str
    url: str
    token: str | None
    auth_scheme: str | None = None
    auth_credentials: str | None = None
    """Sent as `Authorization: <scheme> <credentials>` with each notification."""


class PushConfigRecord(NewPushConfig):
    """A stored push target, with when it was set."""

    created_at: datetime


class PushConfigStore:
    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self._pool = pool

    async def put(self, config: NewPushConfig) -> PushConfigRecord:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                UPSERT_PUSH_CONFIG_SQL,
                (
                    config.task_id,
                    config.id,
                    config.tenant_id,
                    config.url,
                    config.token,
                    config.auth_scheme,
                    config.auth_credentials,
                ),
            )
            row = await cur.fetchone()
        assert row is not None
        return PushConfigRecord.model_validate(row)

    async def for_task(self, task_id: str) -> list[PushConfigRecord]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(SELECT_PUSH_CONFIGS_SQL, (task_id,))
            rows = await cur.fetchall()
        return [PushConfigRecord.model_validate(row) for row in rows]

    async def get(self, task_id: str, config_id: str) -> PushConfigRecord | None:
        return next((c for c in await self.for_task(task_id) if c.id == config_id), None)

    async def delete(self, task_id: str, config_id: str) -> bool:
        async with self._pool.connection() as conn:
            cur = await conn.execute(DELETE_PUSH_CONFIG_SQL, (task_id, config_id))
            return cur.rowcount > 0
