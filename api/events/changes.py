"""What changes in a run: MCP's resource updates and `start_run`'s wait follow these.

Both read the API's one event hub (Postgres LISTEN/NOTIFY, `api/events/hub.py`): a
durable event of a run means the run's resource changed. The hub's notices say only
that something happened, so nothing here trusts their content beyond the run key and
the event type; what a client then reads goes through the service, with its checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack

from keel.api.events.hub import DeltaNotice, EventHub, EventNotice, Resync, Subscription

__all__ = ["FINAL_EVENTS", "NEEDS_YOU_EVENTS", "RunChange", "changes_of"]

FINAL_EVENTS = frozenset({"done", "error", "cancelled"})
"""Events after which a run has its final status (and, on `done`, its report)."""
NEEDS_YOU_EVENTS = frozenset({"interaction_pending"})
"""Events after which a run waits for a person."""
POLL_S = 5.0
"""With the hub's LISTEN connection down, how often a change is assumed, so a client
refetches rather than missing one."""


class RunChange:
    """One change of a run: its key in the store and the event type (`None` when the hub
    may have missed notices and the run may have changed in any way)."""

    def __init__(self, key: str, event: str | None) -> None:
        self.key = key
        self.event = event

    @property
    def final(self) -> bool:
        return self.event is None or self.event in FINAL_EVENTS


async def changes_of(hub: EventHub, keys: Iterable[str]) -> AsyncIterator[RunChange]:
    """The changes of the runs stored under `keys`, from now on, until the caller stops
    iterating. Live text deltas are not changes: a run's resource shows stored state."""
    queue: asyncio.Queue[RunChange] = asyncio.Queue()

    async def pump(key: str, subscription: Subscription) -> None:
        while True:
            notice = await subscription.next(None if hub.listening else POLL_S)
            if isinstance(notice, DeltaNotice):
                continue
            if isinstance(notice, EventNotice):
                queue.put_nowait(RunChange(key, notice.type))
            elif isinstance(notice, Resync) or (notice is None and not hub.listening):
                queue.put_nowait(RunChange(key, None))

    async with AsyncExitStack() as stack:
        tasks = []
        for key in dict.fromkeys(keys):
            subscription = await stack.enter_async_context(hub.subscribe(key))
            tasks.append(asyncio.create_task(pump(key, subscription)))
        try:
            while True:
                yield await queue.get()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
