"""Refusals written to the audit log before they are answered, at a rate a flood cannot abuse.

Anyone can send a thousand bad tokens, so a refusal is recorded in full at most
`per_window` times per source (a client address, or a tenant's user) and reason in a
window of `window_s` seconds; the ones after are counted in memory, and when the window
ends one summary row (`refusals.suppressed`) records how many there were. Recording is
awaited before the caller hears the 401/403/404, so an entry that is written is
committed first; a suppressed refusal costs a dictionary lookup, nothing on the
database, so a flood neither fills the log nor slows `/health`.

The counts live in this API process: several processes each keep their own (the bound
is per process), and a process killed mid-window loses that window's count.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from keel.activities.store.audit import AuditEntry, AuditLog

__all__ = ["SUPPRESSED_ACTION", "RefusalLimiter"]

log = logging.getLogger("keel.api")

SUPPRESSED_ACTION = "refusals.suppressed"
# Beyond this many (source, reason) windows at once, new sources share one window, so
# a flood from many addresses is bounded in memory as well as in rows.
MAX_WINDOWS = 10_000
MANY_SOURCES = "(many sources)"
FLUSH_TICK_S = 1.0
# Refusal rows are written this many at a time: appends to one chain serialise on its
# lock anyway, and a burst of them waiting there would hold the pool's connections that
# /health and real requests need.
MAX_CONCURRENT_WRITES = 2


@dataclass
class _Window:
    started: float
    first_at: datetime
    template: AuditEntry
    written: int = 0
    suppressed: int = 0


_Key = tuple[str | None, str, str, str]  # tenant, source, action, reason


class RefusalLimiter:
    """Appends refusals to the audit log, a bounded number per source, reason and window."""

    def __init__(
        self,
        log_: AuditLog,
        *,
        per_window: int,
        window_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log_
        self.per_window = per_window
        self.window_s = window_s
        self._clock = clock
        self._windows: dict[_Key, _Window] = {}
        self._writers = asyncio.Semaphore(MAX_CONCURRENT_WRITES)

    async def record(self, entry: AuditEntry, *, source: str, reason: str) -> None:
        """Append `entry` now if its window has room, else count it for the summary."""
        key: _Key = (entry.tenant_id, source, entry.action, reason)
        if key not in self._windows and len(self._windows) >= MAX_WINDOWS:
            key = (entry.tenant_id, MANY_SOURCES, entry.action, reason)
        # Every count changes before the first await, so concurrent refusals never race.
        now = self._clock()
        ended = None
        window = self._windows.get(key)
        if window is not None and now - window.started >= self.window_s:
            ended = self._windows.pop(key)
            window = None
        if window is None:
            window = _Window(started=now, first_at=datetime.now(UTC), template=entry)
            self._windows[key] = window
        in_full = window.written < self.per_window
        if in_full:
            window.written += 1
        else:
            window.suppressed += 1
        if ended is not None:
            await self._summarise(key, ended)
        if in_full:
            async with self._writers:
                await self._log.append(entry)

    async def flush(self, *, everything: bool = False) -> None:
        """Write the summary of every window that has ended (all of them at shutdown)."""
        now = self._clock()
        ended = [
            (key, window)
            for key, window in self._windows.items()
            if everything or now - window.started >= self.window_s
        ]
        for key, _ in ended:
            del self._windows[key]
        for key, window in ended:
            await self._summarise(key, window)

    async def run(self) -> None:
        """Close ended windows every second until cancelled; a failed write is retried."""
        while True:
            await asyncio.sleep(min(FLUSH_TICK_S, self.window_s / 2))
            try:
                await self.flush()
            except Exception as exc:  # the database may be away; the counts wait in memory
                log.warning("could not write refusal summaries yet: %s", type(exc).__name__)

    async def close(self) -> None:
        """At shutdown: write what is still counted, if the database lets us."""
        with contextlib.suppress(Exception):
            await self.flush(everything=True)

    async def _summarise(self, key: _Key, window: _Window) -> None:
        if window.suppressed == 0:
            return
        tenant_id, source, action, reason = key
        template = window.template
        try:
            async with self._writers:
                await self._log.append(
                    AuditEntry(
                        tenant_id=tenant_id,
                        actor=template.actor,
                        category=template.category,
                        action=SUPPRESSED_ACTION,
                        severity="warning",
                        subject=template.subject,
                        detail={
                            "action": action,
                            "reason": reason,
                            "source": source,
                            "count": window.suppressed,
                            "recorded_in_full": window.written,
                            "window_s": self.window_s,
                            "window_started_at": window.first_at.isoformat(),
                        },
                    )
                )
        except Exception:
            # Keep the count for the next try rather than lose it.
            current = self._windows.get(key)
            if current is None:
                self._windows[key] = window
            else:
                current.suppressed += window.suppressed
            raise
