"""Reads the console needs beyond a run's record and events: a tool call's stored output,
and usage per day and per agent."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

TOOL_OUTPUT_SQL = (
    "SELECT m.name, m.content, m.is_error FROM messages m JOIN runs r ON r.id = m.run_id"
    " WHERE m.run_id = %s AND r.tenant_id = %s AND m.step = %s AND m.tool_call_id = %s"
    " AND m.role = 'tool'"
)
USAGE_SQL = (
    "SELECT date_trunc('day', c.created_at AT TIME ZONE 'UTC')::date AS day, r.agent,"
    " count(*) AS llm_calls,"
    " coalesce(sum(c.prompt_tokens), 0)::bigint AS prompt_tokens,"
    " coalesce(sum(c.completion_tokens), 0)::bigint AS completion_tokens,"
    " coalesce(sum(c.cost_usd), 0)::float AS cost_usd"
    " FROM llm_calls c JOIN runs r ON r.id = c.run_id"
    " WHERE r.tenant_id = %s AND c.created_at >= %s"
    " GROUP BY 1, 2 ORDER BY 1, 2"
)


class StoredToolOutput(BaseModel):
    """The whole output of one tool call, as the model saw it."""

    name: str | None
    content: str
    is_error: bool


class UsageRow(BaseModel):
    """LLM calls, tokens and cost of one agent on one UTC day."""

    day: date
    agent: str
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


class ConsoleReads:
    """Tenant-scoped reads; every query names the tenant, so none crosses one."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool

    async def tool_output(
        self, tenant_id: str, run_id: str, step: int, call_id: str
    ) -> StoredToolOutput | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(TOOL_OUTPUT_SQL, (run_id, tenant_id, step, call_id))
            row = await cur.fetchone()
        if row is None:
            return None
        return StoredToolOutput(
            name=row["name"], content=row["content"] or "", is_error=row["is_error"]
        )

    async def usage(self, tenant_id: str, since: datetime) -> list[UsageRow]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(USAGE_SQL, (tenant_id, since))
            rows = await cur.fetchall()
        return [UsageRow.model_validate(row) for row in rows]
