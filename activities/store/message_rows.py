"""The `messages` table: a run's conversation, written idempotently on `(run_id, step, ord)`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from keel.activities.store.event_rows import events_json, put_event_in
from keel.activities.store.postgres_text import sha256_text, storable, storable_json
from keel.activities.store.records import MessageRecord
from keel.activities.store.store_pool import PooledStore

INSERT_MESSAGE_SQL = (
    "INSERT INTO messages (run_id, step, ord, role, content, tool_calls, tool_call_id,"
    " name, is_error, sha256) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT DO NOTHING"
)
OUTPUT_REPEATS_SQL = (
    "SELECT EXISTS (SELECT 1 FROM messages WHERE run_id = %s AND step < %s"
    " AND role = 'tool' AND sha256 = %s) AS repeats"
)
# A fork's seed holds the session's earlier turns it saw already, so none are added.
SESSION_HISTORY_SQL = (
    "SELECT input, report FROM runs WHERE session_id = %s AND id <> %s"
    " AND created_at < (SELECT created_at FROM runs WHERE id = %s)"
    " AND (SELECT forked_from FROM runs WHERE id = %s) IS NULL"
    " AND report IS NOT NULL ORDER BY created_at"
)
RUN_MESSAGES_SQL = (
    "SELECT step, ord, role, content, tool_calls, tool_call_id, name,"
    " is_error, sha256 FROM messages WHERE run_id = %s ORDER BY step, ord"
)
RUN_MESSAGES_AFTER_SQL = (
    "SELECT step, ord, role, content, tool_calls, tool_call_id, name,"
    " is_error, sha256 FROM messages WHERE run_id = %s"
    " AND (step = 0 OR step > %s) ORDER BY step, ord"
)
SELECT_MESSAGE_SQL = (
    "SELECT step, ord, role, content, tool_calls, tool_call_id, name, is_error, sha256"
    " FROM messages WHERE run_id = %s AND step = %s AND ord = %s"
)
TOOL_ANSWER_SQL = (
    "WITH earlier AS (SELECT is_error, sha256 FROM messages"
    " WHERE run_id = %(run)s AND step = %(step)s AND ord = %(ord)s),"
    " message AS (INSERT INTO messages (run_id, step, ord, role, content, tool_call_id, name,"
    " is_error, sha256) VALUES (%(run)s, %(step)s, %(ord)s, 'tool', %(content)s, %(call_id)s,"
    " %(name)s, %(is_error)s, %(sha)s) ON CONFLICT DO NOTHING),"
    " written AS (INSERT INTO events (run_id, seq, type, data)"
    " SELECT %(run)s, (e->>'seq')::int, e->>'type', e->'data'"
    " FROM jsonb_array_elements(%(events)s) AS e ON CONFLICT DO NOTHING)"
    " SELECT (SELECT is_error FROM earlier) AS stored_error,"
    " EXISTS (SELECT 1 FROM messages WHERE run_id = %(run)s AND step < %(step)s"
    " AND role = 'tool' AND sha256 = coalesce((SELECT sha256 FROM earlier), %(sha)s)) AS repeats"
)
"""A tool's answer, its events and whether an earlier step had the same output, in one
statement (one round trip, atomic without a transaction). A retried call finds the
answer an earlier attempt stored: that one stays, and its error flag is returned."""
COPY_TOOL_MESSAGE_SQL = (
    "INSERT INTO messages (run_id, step, ord, role, content, tool_call_id, name,"
    " is_error, sha256)"
    " SELECT run_id, %s, %s, 'tool', content, %s, %s, is_error, sha256"
    " FROM messages WHERE run_id = %s AND step = %s AND ord = %s"
    " ON CONFLICT DO NOTHING"
)


async def put_message_in(
    conn: AsyncConnection[dict[str, Any]],
    run_id: str,
    step: int,
    ord_: int,
    role: str,
    content: str,
    *,
    tool_calls: list[dict[str, object]] | None = None,
    tool_call_id: str | None = None,
    name: str | None = None,
    is_error: bool = False,
) -> None:
    """Write a message inside a caller's transaction; a stored one is left as it is."""
    content = storable(content)
    await conn.execute(
        INSERT_MESSAGE_SQL,
        (
            run_id,
            step,
            ord_,
            role,
            content,
            Jsonb(storable_json(tool_calls)) if tool_calls is not None else None,
            tool_call_id,
            name,
            is_error,
            sha256_text(content),
        ),
    )


@dataclass(frozen=True)
class ToolAnswer:
    """What storing a tool's answer found."""

    stored_error: bool | None
    """The error flag of an answer an earlier attempt had stored (which stays); None if new."""
    repeats: bool
    """An earlier step's tool output had the same SHA-256."""


def with_session(earlier: list[dict[str, Any]], rows: list[MessageRecord]) -> list[MessageRecord]:
    """The run's messages with its session's earlier runs (rows of `SESSION_HISTORY_SQL`,
    input and report each) after the system prompt, before this run's input."""
    history: list[MessageRecord] = []
    for row in earlier:
        history.append(MessageRecord(step=-1, ord=0, role="user", content=row["input"]))
        history.append(MessageRecord(step=-1, ord=1, role="assistant", content=row["report"]))
    if history and rows:
        return rows[:1] + history + rows[1:]
    return history + rows


async def output_repeats_in(
    conn: AsyncConnection[dict[str, Any]], run_id: str, step: int, sha256: str
) -> bool:
    """Whether a tool output of a step before `step` has this SHA-256."""
    cur = await conn.execute(OUTPUT_REPEATS_SQL, (run_id, step, sha256))
    row = await cur.fetchone()
    return bool(row and row["repeats"])


class MessageRows(PooledStore):
    """A run's messages: the conversation a model call reads, tools' outputs."""

    async def conversation(
        self, run_id: str, session_id: str | None, *, after_step: int | None = None
    ) -> list[MessageRecord]:
        """Earlier runs of the session (input and report), then this run's messages.

        With `after_step` (the last step a compaction summary covers), only the opening
        messages and those after it: the summary stands for the rest.
        """
        async with self._pool.connection() as conn:
            earlier: list[dict[str, Any]] = []
            if session_id and after_step is None:
                cur = await conn.execute(SESSION_HISTORY_SQL, (session_id, run_id, run_id, run_id))
                earlier = await cur.fetchall()
            if after_step is None:
                cur = await conn.execute(RUN_MESSAGES_SQL, (run_id,))
            else:
                cur = await conn.execute(RUN_MESSAGES_AFTER_SQL, (run_id, after_step))
            rows = [MessageRecord.model_validate(row) for row in await cur.fetchall()]
        return with_session(earlier, rows)

    async def get_message(self, run_id: str, step: int, ord_: int) -> MessageRecord | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(SELECT_MESSAGE_SQL, (run_id, step, ord_))
            row = await cur.fetchone()
        return MessageRecord.model_validate(row) if row else None

    async def put_user_message(self, run_id: str, step: int, ord_: int, content: str) -> None:
        async with self._pool.connection() as conn:
            await put_message_in(conn, run_id, step, ord_, "user", content)

    async def put_tool_message(
        self,
        *,
        run_id: str,
        step: int,
        ord_: int,
        call_id: str,
        name: str,
        content: str,
        is_error: bool,
        events: Sequence[tuple[int, str, dict[str, object]]] = (),
    ) -> bool:
        """Store a tool's output; returns whether an earlier step had the same output."""
        answer = await self.answer_tool_call(
            run_id=run_id,
            step=step,
            ord_=ord_,
            call_id=call_id,
            name=name,
            content=content,
            is_error=is_error,
            events=events,
        )
        return answer.repeats

    async def answer_tool_call(
        self,
        *,
        run_id: str,
        step: int,
        ord_: int,
        call_id: str,
        name: str,
        content: str,
        is_error: bool,
        events: Sequence[tuple[int, str, dict[str, object]]] = (),
    ) -> ToolAnswer:
        """Store a tool's output and its events in one round trip (`TOOL_ANSWER_SQL`)."""
        content = storable(content)
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                TOOL_ANSWER_SQL,
                {
                    "run": run_id,
                    "step": step,
                    "ord": ord_,
                    "content": content,
                    "call_id": call_id,
                    "name": name,
                    "is_error": is_error,
                    "sha": sha256_text(content),
                    "events": events_json(events),
                },
            )
            row = await cur.fetchone()
        assert row is not None
        return ToolAnswer(stored_error=row["stored_error"], repeats=bool(row["repeats"]))

    async def output_repeats(self, run_id: str, step: int, sha256: str) -> bool:
        """Whether a tool output of a step before `step` has this SHA-256."""
        async with self._pool.connection() as conn:
            return await output_repeats_in(conn, run_id, step, sha256)

    async def copy_tool_message(
        self,
        *,
        run_id: str,
        step: int,
        ord_: int,
        call_id: str,
        name: str,
        source_step: int,
        source_ord: int,
        events: Sequence[tuple[int, str, dict[str, object]]] = (),
    ) -> None:
        """Answer a repeated call with the stored answer of the first one."""
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                COPY_TOOL_MESSAGE_SQL, (step, ord_, call_id, name, run_id, source_step, source_ord)
            )
            for seq, type_, data in events:
                await put_event_in(conn, run_id, seq, type_, data)
