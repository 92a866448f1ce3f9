"""`subscriptions/listen` (MCP 2026-07-28) over Keel's runs: one request, one stream.

A client lists the resources it wants to hear about; the answer is an event stream
that first acknowledges what it honours, then carries `notifications/resources/updated`
for `keel://runs/{id}` whenever the run records an event, and for
`keel://runs/{id}/report` when the run ends. Each run URI is checked against the
caller's tenant before the stream opens (another tenant's run is "No run …", audited,
as for every read), so nobody hears of a run they could not read. Agents never change
while the server runs, so their URIs (and the tools and prompts lists) are honoured and
never fire; the resource list is not honoured, as it changes with every run started.
"""

from __future__ import annotations

import re
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    ResourceUpdated,
    event_to_notification,
)
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)

from keel.api.core.errors import KeelError, Unavailable
from keel.api.core.service import KeelService
from keel.api.mcp_server.tool_errors import refusal
from keel.api.mcp_server.tools import principal_of

MAX_URIS = 100
"""Resources one stream may watch; a client wanting more opens another stream."""
_RUN = re.compile(r"keel://runs/(?P<run_id>[^/?#]+)(?P<report>/report)?")
_AGENT = re.compile(r"keel://agents/[^/?#]+")


def unavailable(exc: Unavailable) -> MCPError:
    """A server error the client may retry (-32602 would tell it its request is wrong),
    with when to, if known."""
    when = f"in {exc.retry_after_s} seconds" if exc.retry_after_s else "shortly"
    data = {"retryable": True, "retry_after_s": exc.retry_after_s}
    return MCPError(INTERNAL_ERROR, f"{refusal(exc)} Retry the listen {when}.", data)


class RunListen:
    """The `subscriptions/listen` handler of Keel's HTTP server."""

    def __init__(self, service: KeelService) -> None:
        self._service = service

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(INVALID_REQUEST, "subscriptions/listen needs a request id.")
        user = principal_of(ctx.request)
        asked = params.notifications
        uris = list(dict.fromkeys(asked.resource_subscriptions or ()))
        if len(uris) > MAX_URIS:
            raise MCPError(
                INVALID_PARAMS,
                f"One stream watches at most {MAX_URIS} resources; you asked for {len(uris)}. "
                "Open another subscriptions/listen for the rest.",
            )
        runs: dict[str, list[str]] = {}  # store key -> the URIs of it the client watches
        for uri in uris:
            run = _RUN.fullmatch(uri)
            if run is None:
                if _AGENT.fullmatch(uri) is None:
                    raise MCPError(
                        INVALID_PARAMS,
                        f"{uri!r} is no Keel resource; watch keel://runs/{{run_id}}, "
                        "keel://runs/{run_id}/report or keel://agents/{name}.",
                    )
                continue
            try:
                record = await self._service.runs.get(run["run_id"], user)
            except Unavailable as exc:
                raise unavailable(exc) from None
            except KeelError as exc:
                raise MCPError(INVALID_PARAMS, refusal(exc)) from None
            runs.setdefault(record.id, []).append(uri)
        events = self._service.events
        if runs and not events.live:
            raise MCPError(
                INVALID_REQUEST,
                "Run updates are not available: this server has no event hub. Read the "
                "run again to see it change.",
            )
        honored = SubscriptionFilter(
            tools_list_changed=True if asked.tools_list_changed else None,
            prompts_list_changed=True if asked.prompts_list_changed else None,
            resource_subscriptions=uris or None,
        )
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        await ctx.session.send_notification(
            SubscriptionsAcknowledgedNotification(
                params=SubscriptionsAcknowledgedNotificationParams(
                    notifications=honored, _meta=meta
                )
            ),
            related_request_id=subscription_id,
        )
        if not runs or not events.live:
            # Nothing that can fire: the stream stays open until the client closes it.
            await anyio.sleep_forever()
        else:
            async for change in events.changes(runs):
                for uri in runs[change.key]:
                    if uri.endswith("/report") and not change.final:
                        continue
                    await ctx.session.send_notification(
                        event_to_notification(ResourceUpdated(uri=uri), meta),
                        related_request_id=subscription_id,
                    )
        return SubscriptionsListenResult(_meta=meta)
