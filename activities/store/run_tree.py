"""A run and its sub-agent runs: the tree, rolled-up usage, and a child's answer."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from keel.activities.store.records import RunRecord
from keel.workflows.usage.models import TreeUsage

# A tree deeper than sub-agents may nest is a loop in the data: stop there.
MAX_TREE_DEPTH = 16

DESCENDANTS_SQL = """
WITH RECURSIVE tree AS (
    SELECT id, 0 AS depth FROM runs WHERE id = %(root)s AND tenant_id = %(tenant)s
    UNION ALL
    SELECT r.id, t.depth + 1 FROM runs r JOIN tree t ON r.parent_run_id = t.id
    WHERE r.tenant_id = %(tenant)s AND t.depth < %(max_depth)s
)
SELECT runs.* FROM runs JOIN tree ON runs.id = tree.id
ORDER BY tree.depth, runs.created_at, runs.id
"""

CHILD_COUNTS_SQL = """
SELECT parent_run_id, count(*) AS children FROM runs
WHERE tenant_id = %(tenant)s AND parent_run_id = ANY(%(ids)s)
GROUP BY parent_run_id
"""

# A live run waits on someone when it, or a run below it, has a pending interaction. Used
# inside a query over `runs` (it names that row as `runs`).
WAITS_ON_SOMEONE = """
runs.status IN ('queued', 'running') AND EXISTS (
    WITH RECURSIVE tree(id, depth) AS (
        SELECT runs.id, 0
        UNION ALL
        SELECT r.id, t.depth + 1 FROM runs r JOIN tree t ON r.parent_run_id = t.id
        WHERE r.tenant_id = runs.tenant_id AND t.depth < 16
    )
    SELECT 1 FROM interactions i JOIN tree ON i.run_id = tree.id WHERE i.status = 'pending'
)
"""

WAITING_SQL = f"""
SELECT id FROM runs WHERE tenant_id = %(tenant)s AND id = ANY(%(ids)s) AND {WAITS_ON_SOMEONE}
"""

# Each run's tree total: its own recorded model calls and those of every run below it.
# The one place a tree's usage is summed; every surface reads it from here.
TREE_USAGE_SQL = """
WITH RECURSIVE tree AS (
    SELECT id AS root, id, 0 AS depth FROM runs
    WHERE tenant_id = %(tenant)s AND id = ANY(%(ids)s)
    UNION ALL
    SELECT t.root, r.id, t.depth + 1 FROM runs r JOIN tree t ON r.parent_run_id = t.id
    WHERE r.tenant_id = %(tenant)s AND t.depth < %(max_depth)s
)
SELECT tree.root, sum(r.prompt_tokens) AS prompt_tokens,
       sum(r.completion_tokens) AS completion_tokens, sum(r.cost_usd) AS cost_usd,
       count(*) AS runs
FROM tree JOIN runs r ON r.id = tree.id GROUP BY tree.root
"""

CHILD_ANSWER_SQL = "SELECT agent, status, stop_reason, error, report FROM runs WHERE id = %s"


class ChildAnswer(BaseModel):
    """What a `task` call answers: the sub-agent's report, or why there is none."""

    text: str
    is_error: bool
    status: str
    agent: str


class RunTreeStore:
    """Reads over `runs.parent_run_id`, always within one tenant."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool

    async def subtree(self, tenant_id: str, run_id: str) -> list[RunRecord]:
        """The run and every run below it, the run first, then by depth and age."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                DESCENDANTS_SQL,
                {"root": run_id, "tenant": tenant_id, "max_depth": MAX_TREE_DEPTH},
            )
            rows = await cur.fetchall()
        return [RunRecord.model_validate(row) for row in rows]

    async def child_counts(self, tenant_id: str, run_ids: list[str]) -> dict[str, int]:
        """How many sub-agent runs each run started directly (absent: none)."""
        if not run_ids:
            return {}
        async with self._pool.connection() as conn:
            cur = await conn.execute(CHILD_COUNTS_SQL, {"tenant": tenant_id, "ids": run_ids})
            rows = await cur.fetchall()
        return {str(row["parent_run_id"]): int(row["children"]) for row in rows}

    async def waiting(self, tenant_id: str, run_ids: list[str]) -> set[str]:
        """Those of the runs that wait on a person now (they or a sub-agent run below
        them have a pending interaction)."""
        if not run_ids:
            return set()
        async with self._pool.connection() as conn:
            cur = await conn.execute(WAITING_SQL, {"tenant": tenant_id, "ids": run_ids})
            rows = await cur.fetchall()
        return {str(row["id"]) for row in rows}

    async def tree_usage(self, tenant_id: str, run_ids: list[str]) -> dict[str, TreeUsage]:
        """Each run's tree usage: its own model calls and its sub-agent runs' (absent: no
        such run in the tenant)."""
        if not run_ids:
            return {}
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                TREE_USAGE_SQL,
                {"tenant": tenant_id, "ids": run_ids, "max_depth": MAX_TREE_DEPTH},
            )
            rows = await cur.fetchall()
        return {
            str(row["root"]): TreeUsage(
                prompt_tokens=int(row["prompt_tokens"]),
                completion_tokens=int(row["completion_tokens"]),
                total_tokens=int(row["prompt_tokens"]) + int(row["completion_tokens"]),
                cost_usd=round(float(row["cost_usd"]), 6),
                runs=int(row["runs"]),
            )
            for row in rows
        }

    async def child_answer(self, run_id: str) -> ChildAnswer:
        """The report of a finished sub-agent run, as the parent's model reads it."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(CHILD_ANSWER_SQL, (run_id,))
            row = await cur.fetchone()
        if row is None:
            return ChildAnswer(
                text=f"Error: the sub-agent run {run_id} left no record; it did not run.",
                is_error=True,
                status="failed",
                agent="",
            )
        status, report = row["status"], row["report"] or ""
        if status == "completed" and report.strip():
            return ChildAnswer(text=report, is_error=False, status=status, agent=row["agent"])
        why = row["error"] or row["stop_reason"] or "no report"
        text = (
            f"Error: the sub-agent {row['agent']} (run {run_id}) ended {status} ({why}) "
            "without a report. Do that part yourself, or say in your answer that it is missing."
        )
        return ChildAnswer(text=text, is_error=True, status=status, agent=row["agent"])
