"""Tool outputs held aside until a plugin's `tool.after` hooks have seen them."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from keel.activities.store.postgres_text import storable

HOLD_SQL = (
    "INSERT INTO held_tool_outputs (run_id, step, ord, content, is_error)"
    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (run_id, step, ord) DO NOTHING"
)
GET_SQL = (
    "SELECT content, is_error FROM held_tool_outputs WHERE run_id = %s AND step = %s AND ord = %s"
)
RELEASE_SQL = "DELETE FROM held_tool_outputs WHERE run_id = %s AND step = %s AND ord = %s"


class HeldOutputStore:
    """Keyed like messages, so a retried tool or hook activity finds what the first held."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool

    async def hold(self, run_id: str, step: int, ord_: int, content: str, is_error: bool) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(HOLD_SQL, (run_id, step, ord_, storable(content), is_error))

    async def get(self, run_id: str, step: int, ord_: int) -> tuple[str, bool] | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(GET_SQL, (run_id, step, ord_))
            row = await cur.fetchone()
        return (str(row["content"]), bool(row["is_error"])) if row else None

    async def release(self, run_id: str, step: int, ord_: int) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(RELEASE_SQL, (run_id, step, ord_))
