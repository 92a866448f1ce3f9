"""A forked run's row: created queued with its lineage and the conversation it starts from.

A fork's seed (the original's messages up to the step it was forked at, and the new user
message) is written under the fork's step 0, in order, in the same transaction as its
row, so the run's first model call reads it as its opening; the fork's own steps follow
from step 1 as any run's do. The findings the original recorded through that step join
the fork's ledger the same way. The original's rows are only read.
"""

from __future__ import annotations

from collections.abc import Sequence

from keel.activities.store.message_rows import put_message_in
from keel.activities.store.records import MessageRecord, NewRun
from keel.activities.store.run_rows import create_run_in
from keel.activities.store.store_pool import PooledStore

# With the commit of the original's workspace after that step, where one was recorded.
SET_LINEAGE_SQL = (
    "UPDATE runs SET forked_from = %(source)s, forked_at_step = %(step)s, forked_tree ="
    " (SELECT commit_sha FROM workspace_trees WHERE run_id = %(source)s AND step <= %(step)s"
    " ORDER BY step DESC LIMIT 1) WHERE id = %(fork)s"
)
# The findings the original recorded through that step are the fork's too (its model read
# them); kept under the seed's step, in order, so none meets a key of the fork's own.
COPY_FINDINGS_SQL = (
    "INSERT INTO run_findings (run_id, source, step, ord, idx, file, line, severity, title,"
    " detail) SELECT %(fork)s, source, 0,"
    " (row_number() OVER (ORDER BY step, ord, idx, source))::int, 0,"
    " file, line, severity, title, detail FROM run_findings"
    " WHERE run_id = %(source)s AND step <= %(step)s ON CONFLICT DO NOTHING"
)
SEED_STEP = 0
"""The step a fork's seed is written under: the opening, before the fork's first call."""


class ForkRows(PooledStore):
    """Forked runs' rows and seeds."""

    async def create_fork(
        self, run: NewRun, *, forked_from: str, step: int, seed: Sequence[MessageRecord]
    ) -> bool:
        """Record a queued fork, its texts, lineage and seed in one transaction; False if a
        run with this id already exists (then nothing is written)."""
        async with self._pool.connection() as conn, conn.transaction():
            if not await create_run_in(conn, run):
                return False
            lineage = {"source": forked_from, "step": step, "fork": run.run_id}
            await conn.execute(SET_LINEAGE_SQL, lineage)
            await conn.execute(COPY_FINDINGS_SQL, lineage)
            for ord_, message in enumerate(seed):
                await put_message_in(
                    conn,
                    run.run_id,
                    SEED_STEP,
                    ord_,
                    message.role,
                    message.content or "",
                    tool_calls=message.tool_calls,
                    tool_call_id=message.tool_call_id,
                    name=message.name,
                    is_error=message.is_error,
                )
            return True
