"""A client's mistake is one warning line, never an error with a traceback.

Every 4xx answer (bad JSON, an unknown JSON-RPC method, a missing token, a run of
another tenant) is logged once, at warning, as method, route and status. Nothing of
the request goes in the line: not its body, not its headers, so no token and no
secret can reach the log this way.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ClientErrorLog", "quiet_a2a_client_errors"]

log = logging.getLogger("keel.api.requests")


class ClientErrorLog:
    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        status = 0

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        await self._app(scope, receive, send_status)
        if 400 <= status < 500:
            route = getattr(scope.get("route"), "path", None) or "unmatched route"
            log.warning("%s %s -> %d (client error)", scope.get("method"), route, status)


# What the a2a-sdk's dispatcher logs about a malformed request, besides the one
# warning line it also writes: a traceback at error level, and the body at debug.
A2A_DISPATCHER_LOGGER = "a2a.server.routes.jsonrpc_dispatcher"
_A2A_NOISE = {
    "Failed to validate base JSON-RPC request",
    "Failed to parse request params",
    "Request body: %s",
}


class _DropA2ANoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg not in _A2A_NOISE


def quiet_a2a_client_errors() -> None:
    """Keep the SDK's one warning per bad JSON-RPC request; drop its traceback and body."""
    dispatcher = logging.getLogger(A2A_DISPATCHER_LOGGER)
    if not any(isinstance(f, _DropA2ANoise) for f in dispatcher.filters):
        dispatcher.addFilter(_DropA2ANoise())
