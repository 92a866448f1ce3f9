"""A run's events as the surfaces follow them: the live stream, changes and wake-ups.

The event hub (one Postgres LISTEN connection per API process) and the shared event
reads stay behind the service: a surface asks for a run's stream (`stream`), for the
changes of some runs (`changes`, MCP's resource updates), or for a wake-up when a
run moves (`wake`, A2A's blocking sends), and renders what it gets in its protocol.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager

from keel.activities.store.records import RunRecord
from keel.activities.store.run_store import Store
from keel.api.events.changes import RunChange, changes_of
from keel.api.events.hub import EventHub
from keel.api.events.stream import FINISHED_STATUSES, EventReads, RunEventStream

__all__ = ["RunEvents", "Wake"]

Wake = Callable[[float], Awaitable[None]]
"""Wait for the run's next event, or at most the given seconds."""


class RunEvents:
    """The live side of runs; without a hub (a process that serves no stream) streams
    poll and `changes` says there is nothing live to follow."""

    def __init__(self, store: Store, hub: EventHub | None) -> None:
        self._store = store
        self._hub = hub
        self._reads = EventReads(store)

    @property
    def live(self) -> bool:
        """Whether changes can be followed as they happen (there is an event hub)."""
        return self._hub is not None

    def stream(self, record: RunRecord, *, after: int = 0) -> RunEventStream:
        """The run's durable events after `after`, in seq order, and its text deltas, live
        until its terminal event. `record` is one the caller was allowed to read."""
        if self._hub is None:
            raise RuntimeError("This service has no event hub; it cannot stream runs.")
        return RunEventStream(
            self._store,
            self._reads,
            self._hub,
            record.id,
            tenant_id=record.tenant_id,
            after=max(after, 0),
            finished=record.status in FINISHED_STATUSES,
        )

    def changes(self, keys: Iterable[str]) -> AsyncIterator[RunChange]:
        """The changes of the runs stored under `keys`, from now on (needs `live`)."""
        if self._hub is None:
            raise RuntimeError("This service has no event hub; check `live` first.")
        return changes_of(self._hub, keys)

    @asynccontextmanager
    async def wake(self, key: str) -> AsyncIterator[Wake]:
        """A wait for the run stored under `key` to move: its next event notice, or at
        most the seconds given (a plain sleep without a hub)."""
        if self._hub is None:
            yield asyncio.sleep
            return
        async with self._hub.subscribe(key) as subscription:

            async def wake(wait_s: float) -> None:
                await subscription.next(wait_s)

            yield wake
