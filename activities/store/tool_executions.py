"""The `tool_executions` table: an acting call's claim, so it runs once."""

from __future__ import annotations

from keel.activities.store.store_pool import PooledStore

CLAIM_EXECUTION_SQL = (
    "INSERT INTO tool_executions (run_id, step, ord, claimant) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT (run_id, step, ord) DO UPDATE SET claimant = EXCLUDED.claimant"
    " WHERE tool_executions.process_started_at IS NULL RETURNING 1"
)
EXECUTION_STARTS_SQL = (
    "UPDATE tool_executions SET process_started_at = now()"
    " WHERE run_id = %s AND step = %s AND ord = %s AND claimant = %s"
    " AND process_started_at IS NULL"
)


class ToolExecutions(PooledStore):
    """Claims on acting tool calls: never run twice, never dropped."""

    async def claim_execution(self, run_id: str, step: int, ord_: int, claimant: str) -> bool:
        """Claim an acting call for `claimant`; False if an earlier attempt started it.

        A claim whose call never started (the worker died in between) passes to the new
        claimant, so a call is run once: never twice, and never dropped.
        """
        async with self._pool.connection() as conn:
            cur = await conn.execute(CLAIM_EXECUTION_SQL, (run_id, step, ord_, claimant))
            return await cur.fetchone() is not None

    async def execution_starts(self, run_id: str, step: int, ord_: int, claimant: str) -> bool:
        """Record that `claimant` starts the call now; False if another attempt took it over."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(EXECUTION_STARTS_SQL, (run_id, step, ord_, claimant))
            return cur.rowcount == 1
