"""The coverage ledger: which lines of which files each run's model was shown.

Written with each model call's record (`Store.record_assistant`): every `read_file`
output a request carries, as sent (after the context budget cut it), is one row of
(run, path, first and last line shown, lines in the file). Keyed by what was shown,
so a retried call writes nothing twice. Read over a run's whole tree: a file is read
once the union of its rows covers every line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from keel.activities.store.run_tree import MAX_TREE_DEPTH
from keel.workflows.run.coverage_plan import CoverageRecord

__all__ = ["CoverageStore", "FileView", "views_in"]

RECORD_VIEW_SQL = (
    "INSERT INTO file_views (run_id, path, first_line, last_line, total_lines)"
    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
)
TREE_VIEWS_SQL = """
WITH RECURSIVE tree AS (
    SELECT id, 0 AS depth FROM runs WHERE id = %(root)s AND tenant_id = %(tenant)s
    UNION ALL
    SELECT r.id, t.depth + 1 FROM runs r JOIN tree t ON r.parent_run_id = t.id
    WHERE r.tenant_id = %(tenant)s AND t.depth < %(max_depth)s
)
SELECT v.run_id, v.path, v.first_line, v.last_line, v.total_lines
FROM file_views v JOIN tree ON v.run_id = tree.id
ORDER BY v.created_at, v.run_id, v.path, v.first_line
"""
PART_ANSWERS_SQL = (
    "SELECT id, status, stop_reason, error, report FROM runs"
    " WHERE id = ANY(%(ids)s) AND tenant_id = %(tenant)s"
)
# After the run's input (ord 1) and a memory note (ord 2): the parts' answers.
NOTE_STEP, NOTE_ORD = 0, 3
INSERT_NOTE_SQL = (
    "INSERT INTO messages (run_id, step, ord, role, content)"
    " VALUES (%s, %s, %s, 'user', %s) ON CONFLICT DO NOTHING"
)
STORE_COVERAGE_SQL = "UPDATE runs SET coverage = %s WHERE id = %s"

# A read's first line, `docs/my file.md (lines 1-40 of 90)`: the path runs up to the range
# that ends the line, so it may hold spaces (as `findings_report.READ_HEADER` reads it).
_HEADER = re.compile(r"^(.+?) \(lines (\d+)-(\d+) of (\d+)\)$", re.MULTILINE)
_NUMBERED = re.compile(r"^\s*(\d+)\t", re.MULTILINE)


class FileView:
    """Lines `first`..`last` of `path` (of `total`), shown to run `run_id`."""

    __slots__ = ("first", "last", "path", "run_id", "total")

    def __init__(self, run_id: str, path: str, first: int, last: int, total: int) -> None:
        self.run_id, self.path, self.first, self.last, self.total = (
            run_id,
            path,
            first,
            last,
            total,
        )


def views_in(run_id: str, messages: Iterable[dict[str, Any]]) -> list[FileView]:
    """The `read_file` outputs among a request's messages, as the lines they show."""
    views: list[FileView] = []
    for message in messages:
        if message.get("role") != "tool":
            continue
        content = str(message.get("content") or "")
        header = _HEADER.match(content)
        if header is None:
            continue
        numbers = _NUMBERED.findall(content)
        if not numbers:
            continue
        first, last = int(header[2]), int(numbers[-1])
        # The header's range, cut to the last numbered line the budget let through.
        last = min(last, int(header[3]))
        if last >= first:
            views.append(FileView(run_id, header[1], first, last, int(header[4])))
    return views


class CoverageStore:
    """The ledger's rows, the parts' answers and the run's coverage record."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool

    async def tree_views(self, tenant_id: str, run_id: str) -> list[FileView]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                TREE_VIEWS_SQL, {"root": run_id, "tenant": tenant_id, "max_depth": MAX_TREE_DEPTH}
            )
            rows = await cur.fetchall()
        return [
            FileView(r["run_id"], r["path"], r["first_line"], r["last_line"], r["total_lines"])
            for r in rows
        ]

    async def part_answers(self, tenant_id: str, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(PART_ANSWERS_SQL, {"ids": run_ids, "tenant": tenant_id})
            rows = await cur.fetchall()
        return {str(row["id"]): dict(row) for row in rows}

    async def put_note(self, run_id: str, content: str) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(INSERT_NOTE_SQL, (run_id, NOTE_STEP, NOTE_ORD, content))

    async def store_coverage(self, run_id: str, record: CoverageRecord) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(STORE_COVERAGE_SQL, (Jsonb(record.model_dump(mode="json")), run_id))
