"""`start_run` with `wait`: follow the run until it ends or needs a person, telling the
client as it goes.

While it waits, each change of the run is a progress notification (when the request
carried a `progressToken`; progress is the number of steps so far) and, on a change of
status, a log message (`keel.run`, level `info`; `warning` when the run needs a person
or failed) for a client that asked for log messages. Neither reaches a client that did
not ask: the SDK sends progress only against a token and log messages only at or above
the level the client chose.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import LoggingLevel
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from keel.activities.store.records import RunRecord
from keel.api.core.run_events import RunEvents
from keel.api.core.runs import FINISHED
from keel.api.core.schemas.runs import RunPublic
from keel.api.core.service import KeelService
from keel.api.core.tenant_ids import in_view
from keel.api.events.changes import RunChange
from keel.api.identity.auth import Principal

MAX_WAIT_S = 300
"""The longest `start_run` waits; `keel mcp`'s upstream timeout is longer."""
POLL_S = 2.0
"""Without an event hub, how often the waiting call re-reads the run."""
LOGGER = "keel.run"


class RunWait:
    """Follows one run for a waiting `start_run`."""

    def __init__(self, service: KeelService) -> None:
        self._service = service

    async def follow(
        self, record: RunRecord, user: Principal, ctx: Context, wait_s: float
    ) -> RunPublic:
        """The run once it has finished, waits for a person, or `wait_s` have passed."""
        shown = in_view(record.tenant_id, record.id)
        runs = self._service.runs
        told = _Told(ctx)
        public = await runs.live(record)
        await told.tell(public)
        if _settled(public):
            return public
        events = self._service.events
        try:
            async with asyncio.timeout(wait_s):
                if not events.live:
                    while not _settled(public):
                        await asyncio.sleep(POLL_S)
                        public = await runs.live(await runs.get(shown, user))
                        await told.tell(public)
                else:
                    # Re-read once after subscribing: an event may have come in between.
                    async for _change in _changes_with_first(events, record.id):
                        public = await runs.live(await runs.get(shown, user))
                        await told.tell(public)
                        if _settled(public):
                            break
        except TimeoutError:
            pass
        return public


async def _changes_with_first(events: RunEvents, key: str) -> AsyncIterator[RunChange | None]:
    yield None
    async for change in events.changes([key]):
        yield change


def _settled(run: RunPublic) -> bool:
    return run.status in FINISHED or bool(run.pending_interactions)


class _Told:
    """What the client has been told, so each notification says something new."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._progress = -1
        self._state: tuple[str, int] | None = None
        # Handshake-era HTTP is stateless here, so `logging/setLevel` cannot hold and
        # logging is not declared there: log messages go only where they were asked for.
        self._logs = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def tell(self, run: RunPublic) -> None:
        waiting = len(run.pending_interactions)
        message = _describe(run, waiting)
        if run.steps > self._progress or (run.status, waiting) != self._state:
            self._progress = max(self._progress, run.steps)
            await self._ctx.report_progress(self._progress, None, message)
        if (run.status, waiting) != self._state:
            self._state = (run.status, waiting)
            if self._logs:
                level: LoggingLevel = "warning" if waiting or run.status == "failed" else "info"
                with warnings.catch_warnings():
                    # The logging capability is deprecated at 2026-07-28, yet still offered.
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await self._ctx.log(
                        level,
                        {"run_id": run.id, "status": run.status, "message": message},
                        logger_name=LOGGER,
                    )


def _describe(run: RunPublic, waiting: int) -> str:
    if waiting:
        return (
            f"Run {run.id} waits for you ({waiting} pending); get_run shows what, "
            "decide answers it."
        )
    if run.status in FINISHED:
        return f"Run {run.id} {run.status} after {run.steps} steps."
    return f"Run {run.id} is {run.status}, step {run.steps}."
