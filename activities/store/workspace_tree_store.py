"""The `workspace_trees` table: the git commit of a run's workspace at a step."""

from __future__ import annotations

from keel.activities.store.store_pool import PooledStore

UPSERT_TREE_SQL = (
    "INSERT INTO workspace_trees (run_id, step, commit_sha) VALUES (%s, %s, %s)"
    " ON CONFLICT (run_id, step) DO UPDATE SET commit_sha = EXCLUDED.commit_sha"
)
HAS_TREE_SQL = "SELECT EXISTS (SELECT 1 FROM workspace_trees WHERE run_id = %s) AS has"
TREE_AT_SQL = (
    "SELECT commit_sha FROM workspace_trees WHERE run_id = %s AND step <= %s"
    " ORDER BY step DESC LIMIT 1"
)


class WorkspaceTrees(PooledStore):
    """Commits of runs' workspaces, before their first write and after each step that wrote."""

    async def record(self, run_id: str, step: int, commit: str) -> None:
        """The step's commit; a later write of the same step replaces it."""
        async with self._pool.connection() as conn:
            await conn.execute(UPSERT_TREE_SQL, (run_id, step, commit))

    async def has_any(self, run_id: str) -> bool:
        async with self._pool.connection() as conn:
            cur = await conn.execute(HAS_TREE_SQL, (run_id,))
            row = await cur.fetchone()
        return bool(row and row["has"])

    async def at(self, run_id: str, step: int) -> str | None:
        """The workspace's commit as it was after `step`: the last recorded at or before it."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(TREE_AT_SQL, (run_id, step))
            row = await cur.fetchone()
        return str(row["commit_sha"]) if row else None
