"""Sessions in Postgres: a conversation and the runs it is made of."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from keel.activities.store.records import RunRecord


class SessionRecord(BaseModel):
    """A session row."""

    id: str
    tenant_id: str
    agent: str
    workspace: str
    model: str | None
    approver: str | None
    created_by: str
    metadata: dict[str, str]
    created_at: datetime


class SessionStore:
    """Create, read and list sessions; writes are idempotent on the session id."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool

    async def create(
        self,
        *,
        session_id: str,
        tenant_id: str,
        agent: str,
        workspace: str,
        model: str | None,
        approver: str | None,
        created_by: str,
        metadata: dict[str, str],
    ) -> SessionRecord:
        async with self._pool.connection() as conn:
            await conn.execute(
                "INSERT INTO sessions (id, tenant_id, agent, workspace, model, approver,"
                " created_by, metadata) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (id) DO NOTHING",
                (
                    session_id,
                    tenant_id,
                    agent,
                    workspace,
                    model,
                    approver,
                    created_by,
                    Jsonb(metadata),
                ),
            )
        record = await self.get(session_id)
        assert record is not None
        return record

    async def get(self, session_id: str) -> SessionRecord | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute("SELECT * FROM sessions WHERE id = %s", (session_id,))
            row = await cur.fetchone()
        return SessionRecord.model_validate(row) if row else None

    async def page(
        self, *, tenant_id: str, limit: int, before: tuple[datetime, str] | None = None
    ) -> list[SessionRecord]:
        clauses = ["tenant_id = %s"]
        params: list[object] = [tenant_id]
        if before:
            clauses.append("(created_at, id) < (%s, %s)")
            params.extend(before)
        params.append(limit)
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT * FROM sessions WHERE "
                + " AND ".join(clauses)
                + " ORDER BY created_at DESC, id DESC LIMIT %s",
                params,  # type: ignore[arg-type]
            )
            rows = await cur.fetchall()
        return [SessionRecord.model_validate(row) for row in rows]

    async def runs(self, session_id: str) -> list[RunRecord]:
        """The session's runs, oldest first: its conversation."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT * FROM runs WHERE session_id = %s ORDER BY created_at, id",
                (session_id,),
            )
            rows = await cur.fetchall()
        return [RunRecord.model_validate(row) for row in rows]
