"""Eval results in Postgres: one row per `keel eval` call, per tenant, written once."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

__all__ = ["EvalRow", "EvalStore", "EvalSummaryRow"]

SUMMARY_COLUMNS = (
    "tenant_id, id, requester, recorded_at, started_at, finished_at, repeat, scenarios, passed,"
    " report_sha256"
)
INSERT_EVAL_SQL = (
    "INSERT INTO eval_results (tenant_id, id, requester, started_at, finished_at, repeat,"
    " scenarios, passed, report_sha256, report)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (tenant_id, id) DO NOTHING"
)
GET_EVAL_SQL = (
    f"SELECT {SUMMARY_COLUMNS}, report FROM eval_results WHERE tenant_id = %s AND id = %s"
)
HELD_ELSEWHERE_SQL = "SELECT 1 FROM eval_results WHERE id = %s AND tenant_id <> %s LIMIT 1"
LIST_EVALS_SQL = (
    f"SELECT {SUMMARY_COLUMNS} FROM eval_results WHERE tenant_id = %s"
    " ORDER BY recorded_at DESC, id DESC LIMIT %s"
)


class EvalSummaryRow(BaseModel):
    """An eval result without its report."""

    tenant_id: str
    id: str
    requester: str
    recorded_at: datetime
    started_at: datetime
    finished_at: datetime
    repeat: int
    scenarios: int
    passed: int
    report_sha256: str


class EvalRow(EvalSummaryRow):
    """An eval result with its report (the eval's JSON)."""

    report: str


class EvalStore:
    """Tenant-scoped: every query names the tenant, so none crosses one."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool

    async def put(self, row: EvalRow) -> EvalRow:
        """Record it unless its id is taken; the row stored under the id either way."""
        async with self._pool.connection() as conn:
            await conn.execute(
                INSERT_EVAL_SQL,
                (
                    row.tenant_id,
                    row.id,
                    row.requester,
                    row.started_at,
                    row.finished_at,
                    row.repeat,
                    row.scenarios,
                    row.passed,
                    row.report_sha256,
                    row.report,
                ),
            )
        stored = await self.get(row.tenant_id, row.id)
        if stored is None:  # pragma: no cover - the row was just written
            raise RuntimeError(f"eval result {row.id} vanished after it was written")
        return stored

    async def get(self, tenant_id: str, eval_id: str) -> EvalRow | None:
        async with self._pool.connection() as conn:
            cur = conn.cursor(row_factory=class_row(EvalRow))
            await cur.execute(GET_EVAL_SQL, (tenant_id, eval_id))
            return await cur.fetchone()

    async def recent(self, tenant_id: str, limit: int) -> list[EvalSummaryRow]:
        async with self._pool.connection() as conn:
            cur = conn.cursor(row_factory=class_row(EvalSummaryRow))
            await cur.execute(LIST_EVALS_SQL, (tenant_id, limit))
            return await cur.fetchall()

    async def held_elsewhere(self, tenant_id: str, eval_id: str) -> bool:
        """Whether another tenant holds this id (a read of it is audited)."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(HELD_ELSEWHERE_SQL, (eval_id, tenant_id))
            return await cur.fetchone() is not None
