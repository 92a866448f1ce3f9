"""One LISTEN connection for the whole API, fanned out to event streams by run id.

Postgres announces each durable event on `keel_events` when it commits (see
migration 004) and the LLM activity sends live `message_delta` notices there.
Notices only say that something happened: streams read the events themselves
from Postgres, so a lost or coalesced notice never loses an event. Whenever the
hub may have missed notices (its connection dropped, or a subscriber fell
behind) it hands the subscriber a `Resync` instead, and the subscriber re-reads.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from psycopg import AsyncConnection

__all__ = ["DeltaNotice", "EventHub", "EventNotice", "Notice", "Resync", "Subscription"]

CHANNEL = "keel_events"
QUEUE_SIZE = 256
"""Notices a subscriber may have waiting before it is told to resync instead."""
PING_EVERY_S = 30.0
"""A silent connection is checked this often, so a dead one is noticed and replaced."""
CONNECT_TIMEOUT_S = 10.0
APPLICATION_NAME = "keel-event-hub"
"""How the LISTEN connection shows in `pg_stat_activity`."""
BACKOFF_FIRST_S = 0.2
BACKOFF_MAX_S = 10.0

log = logging.getLogger("keel.events")


def _now() -> float:
    return time.monotonic()


@dataclass(frozen=True)
class EventNotice:
    """A durable event was committed; read it from the events table."""

    run_id: str
    seq: int
    type: str
    received_at: float = field(default_factory=_now, compare=False)
    """`time.monotonic()` when the hub got it: any read started later sees the event."""


@dataclass(frozen=True)
class DeltaNotice:
    """A piece of assistant text being streamed now; live only, never stored."""

    run_id: str
    step: int
    attempt: int
    delta_index: int
    """Counts the pieces of one attempt at one step from 0; a retry starts again."""
    delta: str


@dataclass(frozen=True)
class Resync:
    """Notices may have been lost; re-read the events table."""

    received_at: float = field(default_factory=_now, compare=False)
    """`time.monotonic()` when it was issued: a read started later sees every lost event."""


Notice = EventNotice | DeltaNotice | Resync


class Subscription:
    """The notices of one run for one reader, in a bounded queue; await `next()` for each."""

    def __init__(self, run_id: str, maxsize: int = QUEUE_SIZE) -> None:
        self.run_id = run_id
        self.resyncs = 0
        """How often this reader fell so far behind that its queue was replaced by a `Resync`."""
        self._maxsize = maxsize
        self._notices: deque[Notice] = deque()
        self._arrived = asyncio.Event()

    async def next(self, wait_s: float | None = None) -> Notice | None:
        """The next notice, waiting for one; None if `wait_s` seconds pass first."""
        if not self._notices:
            self._arrived.clear()
            try:
                # Waiting on an event, not on the queue, so a timeout can never lose a notice.
                await asyncio.wait_for(self._arrived.wait(), wait_s)
            except TimeoutError:
                return None
        return self._notices.popleft()

    def pending(self) -> list[Notice]:
        """Every notice already waiting, without waiting for more."""
        out = list(self._notices)
        self._notices.clear()
        return out

    def offer(self, notice: Notice) -> None:
        """Queue a notice; a reader too far behind gets one `Resync` in place of its backlog."""
        if len(self._notices) >= self._maxsize:
            self._notices.clear()
            self._notices.append(Resync())
            self.resyncs += 1
        else:
            self._notices.append(notice)
        self._arrived.set()


class EventHub:
    """LISTENs on one dedicated connection and hands notices to subscribers of each run."""

    def __init__(self, database_url: str) -> None:
        self._url = database_url
        self._subscribers: dict[str, set[Subscription]] = {}
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()

    @property
    def listening(self) -> bool:
        """True while the LISTEN connection is up."""
        return self._listening.is_set()

    async def start(self, *, wait_s: float = CONNECT_TIMEOUT_S) -> None:
        """Start listening; waits up to `wait_s` for the first connection, then keeps trying."""
        if self._task is not None:
            return
        self._task = asyncio.create_task(self._listen_forever(), name="keel-event-hub")
        try:
            await asyncio.wait_for(self._listening.wait(), wait_s)
        except TimeoutError:
            log.warning(
                "event hub: not listening after %.0f s; live streams fall back to polling "
                "until Postgres answers",
                wait_s,
            )

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._listening.clear()

    @asynccontextmanager
    async def subscribe(self, run_id: str) -> AsyncIterator[Subscription]:
        """Receive the notices of `run_id` from now on, until the block exits."""
        subscription = Subscription(run_id)
        self._subscribers.setdefault(run_id, set()).add(subscription)
        try:
            yield subscription
        finally:
            subscribers = self._subscribers.get(run_id)
            if subscribers is not None:
                subscribers.discard(subscription)
                if not subscribers:
                    del self._subscribers[run_id]

    # -- the listening connection -----------------------------------------

    async def _listen_forever(self) -> None:
        backoff = BACKOFF_FIRST_S
        while True:
            try:
                conn = await AsyncConnection.connect(
                    self._url,
                    autocommit=True,
                    connect_timeout=int(CONNECT_TIMEOUT_S),
                    application_name=APPLICATION_NAME,
                )
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self._listening.set()
                    backoff = BACKOFF_FIRST_S
                    # Anything committed while the hub was not listening is only in the table.
                    self._broadcast(Resync())
                    while True:
                        async for notify in conn.notifies(timeout=PING_EVERY_S):
                            self._dispatch(notify.payload)
                        await conn.execute("SELECT 1")
            except Exception as exc:
                was_listening = self._listening.is_set()
                self._listening.clear()
                log.log(
                    logging.WARNING if was_listening else logging.DEBUG,
                    "event hub: no LISTEN connection (%s); retrying in %.1f s",
                    exc,
                    backoff,
                )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    def _dispatch(self, payload: str) -> None:
        notice = _parse(payload)
        if notice is None:
            log.warning("event hub: ignoring a malformed notice: %.200s", payload)
            return
        for subscription in tuple(self._subscribers.get(notice.run_id, ())):
            subscription.offer(notice)

    def _broadcast(self, notice: Notice) -> None:
        for subscribers in tuple(self._subscribers.values()):
            for subscription in tuple(subscribers):
                subscription.offer(notice)


def _parse(payload: str) -> EventNotice | DeltaNotice | None:
    try:
        body = json.loads(payload)
        if body.get("type") == "message_delta" and "seq" not in body:
            return DeltaNotice(
                run_id=str(body["run_id"]),
                step=int(body["step"]),
                attempt=int(body.get("attempt", 1)),
                delta_index=int(body["delta_index"]),
                delta=str(body["delta"]),
            )
        return EventNotice(run_id=str(body["run_id"]), seq=int(body["seq"]), type=str(body["type"]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
