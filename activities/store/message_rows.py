"""The `messages` table: a run's conversation, written idempotently on `(run_id, step, ord)`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from keel.activities.store.event_rows import put_event_in
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
            history: list[MessageRecord] = []
            if session_id and after_step is None:
                cur = await conn.execute(SESSION_HISTORY_SQL, (session_id, run_id, run_id, run_id))
                for row in await cur.fetchall():
                    history.append(MessageRecord(step=-1, ord=0, role="user", content=row["input"]))
                    history.append(
                        MessageRecord(step=-1, ord=1, role="assistant", content=row["report"])
                    )
            if after_step is None:
                cur = await conn.execute(RUN_MESSAGES_SQL, (run_id,))
            else:
                cur = await conn.execute(RUN_MESSAGES_AFTER_SQL, (run_id, after_step))
            rows = [MessageRecord.model_validate(row) for row in await cur.fetchall()]
        if history and rows:
            # The system prompt stays first; earlier turns go before this run's input.
            return rows[:1] + history + rows[1:]
        return history + rows

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
        async with self._pool.connection() as conn, conn.pipeline(), conn.transaction():
            await put_message_in(
                conn,
                run_id,
                step,
                ord_,
                "tool",
                content,
                tool_call_id=call_id,
                name=name,
                is_error=is_error,
            )
            for seq, type_, data in events:
                await put_event_in(conn, run_id, seq, type_, data)
            return await output_repeats_in(conn, run_id, step, sha256_text(content))

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
