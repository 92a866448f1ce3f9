"""The Postgres store: one pool, and the stores of runs, messages, events and LLM
call traces composed over it.

Every write is idempotent on its natural key — `(run_id, step, ord)` for
messages, `(run_id, seq)` for events, `(run_id, step)` for LLM calls — so a
retried activity changes nothing.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from keel.activities.store.event_rows import EventRows
from keel.activities.store.llm_call_rows import LlmCallRows
from keel.activities.store.message_rows import MessageRows
from keel.activities.store.run_rows import RunRows
from keel.activities.store.schema_migrations import SchemaMigrations
from keel.activities.store.tool_executions import ToolExecutions

# How long a caller waits for a pooled connection, and a new one for Postgres to answer.
POOL_WAIT_S = 5.0
CONNECT_TIMEOUT_S = 5
PING_SQL = "SELECT 1"


class StoreUnavailable(RuntimeError):
    """Postgres could not be reached; retrying later may help."""


class Store(RunRows, MessageRows, EventRows, LlmCallRows, ToolExecutions, SchemaMigrations):
    """Async access to Keel's tables through one connection pool: the stores of
    `run_rows`, `run_texts`, `message_rows`, `event_rows`, `llm_call_rows`,
    `tool_executions` and `schema_migrations`, composed."""

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        wait_s: float = POOL_WAIT_S,
    ) -> Store:
        """A pool that fails fast while Postgres is away and heals when it is back.

        A caller waits at most `wait_s` for a connection, so an outage is an error in
        seconds (the API answers 503, activities are retried) rather than a hang. A
        connection the outage broke fails its next use once and is replaced (checking
        each one as it is handed out would cost a round trip on every statement).
        """
        pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]] = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            timeout=wait_s,
            # Give up on a lost connection at once; the next caller connects anew.
            reconnect_timeout=0,
            kwargs={
                "row_factory": dict_row,
                "autocommit": True,
                "connect_timeout": CONNECT_TIMEOUT_S,
            },
        )
        try:
            await pool.open(wait=True, timeout=20)
        except Exception as exc:
            await pool.close()
            raise StoreUnavailable(
                f"Cannot connect to Postgres ({exc}). Check DATABASE_URL or unset it to use "
                "the embedded database."
            ) from exc
        return cls(pool)

    async def close(self) -> None:
        await self._pool.close()

    async def ping(self) -> None:
        """One round trip to Postgres; raises while it is away."""
        async with self._pool.connection() as conn:
            await conn.execute(PING_SQL)
