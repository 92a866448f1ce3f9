"""What `keel mcp` relays from Keel's `/mcp` besides answers: run updates, progress and
log messages, for stdio clients of either protocol era.

Keel's HTTP server is stateless, so it sends these only on a request's own stream: run
updates on a `subscriptions/listen` stream, progress and log messages on the stream of
the tool call that asked for them (2026-07-28 requests, which carry their log level).
This process holds one client's state for as long as it runs, so it offers the
handshake era what HTTP cannot: `resources/subscribe` (kept as one upstream listen
stream over every subscribed URI) and `logging/setLevel` (the level it then asks each
upstream call for).
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from mcp import Client
from mcp.client.session import LoggingFnT
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    ResourceUpdated,
    event_to_notification,
)
from mcp_types import (
    LOG_LEVEL_META_KEY,
    CallToolRequestParams,
    CallToolResult,
    EmptyResult,
    LoggingLevel,
    LoggingMessageNotificationParams,
    SetLevelRequestParams,
    SubscribeRequestParams,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    UnsubscribeRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

Ctx = ServerRequestContext[Any, Any]
Connect = Callable[..., AbstractAsyncContextManager[Client]]
"""Opens a 2026-07-28 client of `/mcp`: `connect(log_level=..., on_log=...)`."""


class StdioNotices:
    """The stdio side's subscriptions, log level and notifying tool calls."""

    def __init__(self, connect: Connect, plain_call: Callable[..., Any]) -> None:
        self._connect = connect
        self._plain_call = plain_call
        self._level: LoggingLevel | None = None
        self._uris: frozenset[str] = frozenset()
        self._relay: asyncio.Task[None] | None = None

    # -- tools/call ---------------------------------------------------------

    async def call_tool(self, ctx: Ctx, params: CallToolRequestParams) -> CallToolResult:
        """The call, relaying the progress and log messages it asked for, if any."""
        level = self._level_for(ctx)
        meta = ctx.meta or {}
        wants_progress = "progressToken" in meta or "progress_token" in meta
        if level is None and not wants_progress:
            result: CallToolResult = await self._plain_call(params.name, params.arguments)
            return result

        async def on_log(log: LoggingMessageNotificationParams) -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await ctx.session.send_log_message(
                    log.level, log.data, log.logger, related_request_id=ctx.request_id
                )

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)

        async with self._connect(log_level=level, on_log=on_log if level else None) as upstream:
            return await upstream.call_tool(
                params.name,
                params.arguments,
                progress_callback=on_progress if wants_progress else None,
            )

    def _level_for(self, ctx: Ctx) -> LoggingLevel | None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            asked = (ctx.meta or {}).get(LOG_LEVEL_META_KEY)
            return asked if isinstance(asked, str) else None  # type: ignore[return-value]
        return self._level

    # -- logging/setLevel (handshake era) -----------------------------------

    async def set_level(self, ctx: Ctx, params: SetLevelRequestParams) -> EmptyResult:
        self._level = params.level
        return EmptyResult()

    # -- resources/subscribe (handshake era) --------------------------------

    async def subscribe(self, ctx: Ctx, params: SubscribeRequestParams) -> EmptyResult:
        await self._watch(ctx, self._uris | {str(params.uri)})
        return EmptyResult()

    async def unsubscribe(self, ctx: Ctx, params: UnsubscribeRequestParams) -> EmptyResult:
        await self._watch(ctx, self._uris - {str(params.uri)})
        return EmptyResult()

    async def _watch(self, ctx: Ctx, uris: frozenset[str]) -> None:
        """Listen upstream to `uris` before letting go of the old stream, so no update
        falls in between; the upstream's refusal (another tenant's run) is the answer."""
        old, relay = self._relay, None
        if uris:
            acknowledged: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            relay = asyncio.create_task(self._relay_updates(ctx, sorted(uris), acknowledged))
            try:
                await acknowledged
            except BaseException:
                relay.cancel()
                raise
        self._relay, self._uris = relay, uris
        if old is not None:
            old.cancel()

    async def _relay_updates(
        self, ctx: Ctx, uris: list[str], acknowledged: asyncio.Future[None]
    ) -> None:
        session = ctx.session
        try:
            async with (
                self._connect() as upstream,
                upstream.listen(resource_subscriptions=uris) as updates,
            ):
                acknowledged.set_result(None)
                async for event in updates:
                    if isinstance(event, ResourceUpdated):
                        await session.send_resource_updated(event.uri)
        except Exception as exc:
            if not acknowledged.done():
                acknowledged.set_exception(exc)

    async def close(self) -> None:
        if self._relay is not None:
            self._relay.cancel()
            await asyncio.gather(self._relay, return_exceptions=True)

    # -- subscriptions/listen (2026-07-28) ----------------------------------

    async def listen(
        self, ctx: Ctx, params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        """One upstream listen stream per stdio one, relayed with this side's id."""
        asked = params.notifications
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        async with (
            self._connect() as upstream,
            upstream.listen(
                tools_list_changed=bool(asked.tools_list_changed),
                prompts_list_changed=bool(asked.prompts_list_changed),
                resources_list_changed=bool(asked.resources_list_changed),
                resource_subscriptions=list(asked.resource_subscriptions or ()),
            ) as updates,
        ):
            await ctx.session.send_notification(
                SubscriptionsAcknowledgedNotification(
                    params=SubscriptionsAcknowledgedNotificationParams(
                        notifications=updates.honored, _meta=meta
                    )
                ),
                related_request_id=ctx.request_id,
            )
            async for event in updates:
                await ctx.session.send_notification(
                    event_to_notification(event, meta), related_request_id=ctx.request_id
                )
        return SubscriptionsListenResult(_meta=meta)


def _first_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The upstream's MCP error inside `group`, else its first exception."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            pending[:0] = list(exc.exceptions)
        else:
            leaves.append(exc)
    for leaf in leaves:
        if isinstance(leaf, MCPError):
            return leaf
    return leaves[0] if leaves else group


def modern_client(http_client: Any, url: str) -> Connect:
    """`connect` for `StdioNotices`: a 2026-07-28 client per use, over one HTTP client
    (no handshake, so a client costs nothing but its requests)."""
    from mcp.client.streamable_http import streamable_http_client

    @asynccontextmanager
    async def connect(
        *, log_level: LoggingLevel | None = None, on_log: LoggingFnT | None = None
    ) -> AsyncIterator[Client]:
        try:
            async with Client(
                streamable_http_client(url, http_client=http_client),
                mode="2026-07-28",
                cache=None,
                log_level=log_level,
                logging_callback=on_log,
            ) as client:
                yield client
        except BaseExceptionGroup as group:
            # The client's task groups wrap what went wrong; the stdio client should get
            # the upstream's own error (a refusal's sentence), as for a plain call.
            raise _first_error(group) from None

    return connect
