"""A run's live event stream: durable events from Postgres in seq order, woken by the hub.

`RunEventStream` is one client's stream; `EventReads` lets the streams of one
run share each read of the events table, so a hundred viewers cost one query.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TypeVar

from keel.activities.store.records import EventRecord
from keel.activities.store.run_store import Store
from keel.api.core.schemas.events import EventPublic
from keel.api.core.tenant_ids import in_view
from keel.api.events.hub import DeltaNotice, EventHub, Notice, Resync, Subscription
from keel.api.events.line_safe import line_safe

__all__ = ["EventReads", "Outgoing", "RunEventStream"]

HEARTBEAT_S = 15.0
"""Seconds of silence after which a stream sends a `: keepalive` comment (and re-reads)."""
GAP_GRACE_S = 120.0
"""How long a stream holds later events back while an earlier seq is still being written.

Concurrent activities (parallel read-only tools) commit their events out of seq
order; a stream waits for the gap to fill so that it sends in seq order. Longer
than a tool's 90 s timeout; once the run has finished, a gap is skipped at once."""
PAGE_SIZE = 500
TERMINAL_EVENTS = frozenset({"done", "error", "cancelled"})
FINISHED_STATUSES = frozenset({"completed", "failed", "cancelled"})
_Item = TypeVar("_Item", bound="Outgoing | DeltaNotice | str")


class RunEventStream:
    """One client's stream: durable events from Postgres in seq order, woken by the hub."""

    def __init__(
        self,
        store: Store,
        reads: EventReads,
        hub: EventHub,
        run_id: str,
        *,
        tenant_id: str,
        after: int,
        finished: bool,
    ) -> None:
        self._store = store
        self._reads = reads
        self._hub = hub
        self._run_id = run_id
        """The run's key; `tenant_id` owns it and its events show ids as that tenant knows them."""
        self._tenant_id = tenant_id
        self.last_seq = after
        """The seq of the last durable event sent, or the resume point."""
        self._finished = finished
        self._fresh_since = time.monotonic()
        """The next read must start after this moment to see everything announced so far."""
        self._gap_since: float | None = None
        self._last_write = time.monotonic()
        self._held: list[Notice] = []
        """Notices that came after one that needed a re-read; handled after it."""

    async def sse(self) -> AsyncIterator[str]:
        """Keel's own wire format: each event as `EventPublic` JSON, deltas as they come."""
        async for item in self.items():
            if isinstance(item, Outgoing):
                yield item.chunk
            elif isinstance(item, DeltaNotice):
                yield _delta(item, self._tenant_id)
            else:
                yield item

    async def items(self) -> AsyncIterator[Outgoing | DeltaNotice | str]:
        """The stream as items, for surfaces that speak another protocol: durable events
        in seq order, live deltas, and SSE comments (`: connected`, `: keepalive`)."""
        # Subscribe before reading the backlog, so nothing committed in between is missed.
        async with self._hub.subscribe(self._run_id) as subscription:
            self._fresh_since = time.monotonic()
            yield self._wrote(": connected\n\n")
            while True:
                events, more = await self._sendable()
                for event in events:
                    yield self._wrote(event)
                    if event.type in TERMINAL_EVENTS:
                        return
                if more:
                    continue
                if self._finished:
                    return  # finished without a terminal event: nothing more will come
                async for item in self._wait(subscription):
                    yield self._wrote(item)

    def _wrote(self, item: _Item) -> _Item:
        self._last_write = time.monotonic()
        return item

    async def _wait(self, subscription: Subscription) -> AsyncIterator[DeltaNotice | str]:
        """Until the events table may hold something new: live deltas and keepalives."""
        while True:
            if not self._held:
                notice = await subscription.next(self._wait_s())
                if notice is None:
                    if time.monotonic() - self._last_write >= HEARTBEAT_S:
                        yield ": keepalive\n\n"
                    # Re-read anyway: a safety net for notices the hub could not deliver.
                    self._fresh_since = time.monotonic()
                    return
                self._held = [notice, *subscription.pending()]
            while self._held:
                item = self._held.pop(0)
                if isinstance(item, DeltaNotice):
                    yield item
                elif isinstance(item, Resync) or item.seq > self.last_seq:
                    # Events go out before the deltas that were sent after them.
                    self._fresh_since = max(self._fresh_since, item.received_at)
                    return

    def _wait_s(self) -> float:
        now = time.monotonic()
        wait = HEARTBEAT_S - (now - self._last_write)
        if self._gap_since is not None:
            wait = min(wait, GAP_GRACE_S - (now - self._gap_since))
        return max(wait, 0.0)

    async def _sendable(self) -> tuple[list[Outgoing], bool]:
        """One page of the events after `last_seq` that may go out now, and whether more follow."""
        page = await self._reads.after(
            self._run_id, self.last_seq, self._tenant_id, fresh_since=self._fresh_since
        )
        if any(event.type in TERMINAL_EVENTS for event in page):
            self._finished = True  # nothing missing before the end will be written any more
        events: list[Outgoing] = []
        for event in page:
            if event.seq != self.last_seq + 1 and not await self._gap_is_permanent():
                return events, False
            self._gap_since = None
            self.last_seq = event.seq
            events.append(event)
        return events, len(page) == PAGE_SIZE

    async def _gap_is_permanent(self) -> bool:
        """A missing seq is still being written, unless the run is over or it took too long."""
        now = time.monotonic()
        if self._gap_since is None:
            self._gap_since = now
        if self._finished or now - self._gap_since >= GAP_GRACE_S:
            return True
        run = await self._store.get_run(self._run_id)
        self._finished = run is None or run.status in FINISHED_STATUSES
        return self._finished


@dataclass(frozen=True)
class Outgoing:
    """A durable event, formatted for the wire once for every stream that sends it."""

    seq: int
    type: str
    chunk: str
    record: EventRecord
    """The event itself, for surfaces that put it in another shape."""


@dataclass
class _Read:
    started_at: float
    task: asyncio.Future[list[Outgoing]]


class EventReads:
    """Reads events for streams; the streams of one run that need the same rows share a query.

    A stream may join a read only if it started after the notice that woke the
    stream arrived, so the shared snapshot always holds what the notice announced.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._reads: dict[tuple[str, int], _Read] = {}

    async def after(
        self, run_id: str, seq: int, tenant_id: str, *, fresh_since: float
    ) -> list[Outgoing]:
        """Up to `PAGE_SIZE` events after `seq`, read no earlier than `fresh_since`."""
        key = (run_id, seq)
        read = self._reads.get(key)
        if read is None or read.started_at < fresh_since:
            read = _Read(
                time.monotonic(), asyncio.ensure_future(self._read(run_id, seq, tenant_id))
            )
            self._reads[key] = read
            read.task.add_done_callback(functools.partial(self._forget, key, read))
        # Shielded: one stream going away must not cancel the others' read.
        return await asyncio.shield(read.task)

    def _forget(self, key: tuple[str, int], read: _Read, task: asyncio.Future[object]) -> None:
        if self._reads.get(key) is read:
            del self._reads[key]
        if not task.cancelled():
            task.exception()  # every waiter gets it raised; this only marks it retrieved

    async def _read(self, run_id: str, seq: int, tenant_id: str) -> list[Outgoing]:
        events = await self._store.list_events(run_id, after=seq, limit=PAGE_SIZE)
        return [
            Outgoing(seq=e.seq, type=e.type, chunk=_durable(e, tenant_id), record=e) for e in events
        ]


def _durable(event: EventRecord, tenant_id: str) -> str:
    data = line_safe(EventPublic.from_record(event, tenant_id).model_dump_json())
    return f"id: {event.seq}\nevent: {event.type}\ndata: {data}\n\n"


def _delta(notice: DeltaNotice, tenant_id: str) -> str:
    data = json.dumps(
        {
            "run_id": in_view(tenant_id, notice.run_id),
            "step": notice.step,
            "attempt": notice.attempt,
            "delta_index": notice.delta_index,
            "delta": notice.delta,
        },
        ensure_ascii=False,
    )
    return f"event: message_delta\ndata: {line_safe(data)}\n\n"
