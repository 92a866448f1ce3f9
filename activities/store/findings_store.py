"""The findings ledger (migration 022): findings recorded as runs make them, and a run
tree's findings read back, de-duplicated and checked against what the tree read.

Rows are keyed by where a finding was made — run, source, step, call and index — so a
retried activity records nothing twice. See `keel.workflows.run.findings_report`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from keel.activities.store.run_tree import MAX_TREE_DEPTH
from keel.workflows.run.findings import (
    Finding,
    FindingsRecord,
    RecordedFinding,
    extract_all,
    parse_block,
    without_blocks,
)
from keel.workflows.run.findings_report import (
    ReadPage,
    findings_section,
    page_of,
    tree_findings,
)

__all__ = ["FindingsLedger", "SettledFindings"]

FindingSource = Literal["answer", "tool"]

INSERT_FINDING_SQL = (
    "INSERT INTO run_findings (run_id, source, step, ord, idx, file, line, severity, title,"
    " detail) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (run_id, source, step, ord, idx) DO NOTHING"
)
# The run and every run below it, in its tenant (as `run_tree.DESCENDANTS_SQL`).
_TREE = """
WITH RECURSIVE tree AS (
    SELECT id, tenant_id, 0 AS depth FROM runs WHERE id = %(root)s
    UNION ALL
    SELECT r.id, r.tenant_id, t.depth + 1 FROM runs r JOIN tree t ON r.parent_run_id = t.id
    WHERE r.tenant_id = t.tenant_id AND t.depth < %(max_depth)s
)
"""
TREE_FINDINGS_SQL = (
    _TREE + "SELECT runs.agent, f.file, f.line, f.severity, f.title, f.detail"
    " FROM run_findings f JOIN tree ON f.run_id = tree.id JOIN runs ON runs.id = f.run_id"
    " ORDER BY f.created_at, tree.depth, f.run_id, f.step, f.ord, f.idx"
)
# The first line of each read_file answer of the tree: which lines of which file it showed.
TREE_READS_SQL = (
    _TREE + "SELECT DISTINCT split_part(m.content, E'\\n', 1) AS header"
    " FROM messages m JOIN tree ON m.run_id = tree.id"
    " WHERE m.role = 'tool' AND m.name = 'read_file' AND NOT m.is_error"
)
TREE_SIZE_SQL = _TREE + "SELECT count(*) AS runs FROM tree"


class SettledFindings:
    """A finished run's report with its findings section, and its `runs.findings`."""

    def __init__(self, report: str, record: FindingsRecord | None) -> None:
        self.report = report
        self.record = record


class FindingsLedger:
    """Writes and reads of `run_findings`; the `_in` methods join a caller's transaction."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool

    async def record(
        self, run_id: str, source: FindingSource, step: int, ord_: int, found: Sequence[Finding]
    ) -> None:
        """Record findings made at one place of a run (idempotent)."""
        async with self._pool.connection() as conn, conn.transaction():
            await self.record_in(conn, run_id, source, step, ord_, found)

    @staticmethod
    async def record_in(
        conn: AsyncConnection[dict[str, Any]],
        run_id: str,
        source: FindingSource,
        step: int,
        ord_: int,
        found: Sequence[Finding],
    ) -> None:
        for idx, f in enumerate(found):
            await conn.execute(
                INSERT_FINDING_SQL,
                (run_id, source, step, ord_, idx, f.file, f.line, f.severity, f.title, f.detail),
            )

    @staticmethod
    async def tree_in(
        conn: AsyncConnection[dict[str, Any]], run_id: str
    ) -> tuple[list[RecordedFinding], int]:
        """The findings of the run's tree, one per place, checked against its reads; and
        how many runs are below the run."""
        params = {"root": run_id, "max_depth": MAX_TREE_DEPTH}
        rows = await (await conn.execute(TREE_FINDINGS_SQL, params)).fetchall()
        reported = [
            (
                str(row["agent"]),
                Finding(
                    file=row["file"],
                    line=row["line"],
                    severity=row["severity"],
                    title=row["title"],
                    detail=row["detail"],
                ),
            )
            for row in rows
        ]
        pages: list[ReadPage] = []
        if reported:
            for row in await (await conn.execute(TREE_READS_SQL, params)).fetchall():
                page = page_of(row["header"] or "")
                if page is not None:
                    pages.append(page)
        size = await (await conn.execute(TREE_SIZE_SQL, params)).fetchone()
        return tree_findings(reported, pages), int(size["runs"] if size else 1) - 1

    async def tree(self, run_id: str) -> list[RecordedFinding]:
        """The findings of the run's tree as its report shows them."""
        async with self._pool.connection() as conn:
            return (await self.tree_in(conn, run_id))[0]

    @classmethod
    async def settle_in(
        cls,
        conn: AsyncConnection[dict[str, Any]],
        run_id: str,
        *,
        report: str,
        final_step: int | None,
    ) -> SettledFindings:
        """Record the findings blocks of a run's final answer, then render the tree's.

        The LLM step recorded them already when it stored the message (under the same
        keys, so this records nothing new); a run whose answer was stored before that
        gets them here.

        The model's valid blocks move into the ledger and out of its text; the report
        ends with Keel's section, rendered from the ledger of the whole tree, so what a
        sub-agent or an earlier call recorded is there whatever the last answer says. A
        block that cannot be taken stays in the text, and its error is kept."""
        blocks = extract_all(report) if final_step is not None else []
        taken = [b for b in blocks if b.error is None]
        for idx, block in enumerate(taken):
            await cls.record_in(conn, run_id, "answer", final_step or 0, idx + 1, block.findings)
        found, sub_runs = await cls.tree_in(conn, run_id)
        if not found and not blocks:
            return SettledFindings(report, None)
        errors = [b.error for b in blocks if b.error is not None]
        record = FindingsRecord(findings=found, error=errors[-1] if errors else None)
        body = without_blocks(report, keep=lambda text: parse_block(text).error is not None)
        section = findings_section(found, sub_runs=sub_runs)
        text = f"{body.rstrip()}\n\n{section}" if body.strip() else section
        return SettledFindings(text, record)
