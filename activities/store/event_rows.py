"""The `events` table: a run's event stream, written idempotently on `(run_id, seq)`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from keel.activities.store.audit import redact
from keel.activities.store.postgres_text import storable_json
from keel.activities.store.records import EventRecord
from keel.activities.store.store_pool import PooledStore

INSERT_EVENT_SQL = (
    "INSERT INTO events (run_id, seq, type, data) VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING"
)
LIST_EVENTS_SQL = (
    "SELECT run_id, seq, type, data, created_at FROM events"
    " WHERE run_id = %s AND seq > %s ORDER BY seq LIMIT %s"
)
NOTIFY_SQL = "SELECT pg_notify(%s, %s)"


async def put_event_in(
    conn: AsyncConnection[dict[str, Any]],
    run_id: str,
    seq: int,
    type_: str,
    data: dict[str, object],
) -> None:
    """Write an event inside a caller's transaction."""
    # Events reach browsers and logs: secrets in them are masked.
    await conn.execute(
        INSERT_EVENT_SQL,
        (run_id, seq, type_, Jsonb(storable_json(redact(data)))),  # type: ignore[arg-type]
    )


def events_json(events: Sequence[tuple[int, str, dict[str, object]]]) -> Jsonb:
    """Events as one jsonb array of `{seq, type, data}`, for a statement that inserts them
    all at once (`jsonb_array_elements`); masked as `put_event_in` masks them."""
    return Jsonb(
        [
            {"seq": seq, "type": type_, "data": storable_json(redact(data))}  # type: ignore[arg-type]
            for seq, type_, data in events
        ]
    )


class EventRows(PooledStore):
    """A run's events, and NOTIFY for those who wait on them."""

    async def put_event(self, run_id: str, seq: int, type_: str, data: dict[str, object]) -> None:
        async with self._pool.connection() as conn:
            await put_event_in(conn, run_id, seq, type_, data)

    async def notify(self, channel: str, payload: str) -> None:
        """Send a NOTIFY at once (outside any transaction); payloads must stay under 8000 bytes."""
        async with self._pool.connection() as conn:
            await conn.execute(NOTIFY_SQL, (channel, payload))

    async def list_events(
        self, run_id: str, *, after: int = 0, limit: int = 500
    ) -> list[EventRecord]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(LIST_EVENTS_SQL, (run_id, after, limit))
            rows = await cur.fetchall()
        return [EventRecord.model_validate(row) for row in rows]
