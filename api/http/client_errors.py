"""A client's mistake is one info line, never an error with a traceback.

Every 4xx answer (bad JSON, an unknown JSON-RPC method, a missing token, a run of
another tenant) is logged once, at info, as method, route and status: the client was
told, and a terminal at warning (`keel dev`) stays quiet. A 503 (Temporal, Postgres or
the key set away) is one warning line, on every surface alike. Nothing of the request
goes in the line: not its body, not its headers, so no token and no secret can reach
the log this way.
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
        if 400 <= status < 500 or status == 503:
            route = getattr(scope.get("route"), "path", None) or "unmatched route"
            kind = "unavailable, the client may retry" if status == 503 else "client error"
            level = logging.WARNING if status == 503 else logging.INFO
            log.log(level, "%s %s -> %d (%s)", scope.get("method"), route, status, kind)


# What the a2a-sdk's dispatcher logs about a malformed request, besides the one
# warning line it also writes: a traceback at error level, and the body at debug. Its
# v0.3 adapter logs a traceback for params it cannot validate (the answer is -32602).
A2A_DISPATCHER_LOGGER = "a2a.server.routes.jsonrpc_dispatcher"
A2A_V03_LOGGER = "a2a.compat.v0_3.jsonrpc_adapter"
_A2A_NOISE = {
    "Failed to validate base JSON-RPC request",
    "Failed to validate base JSON-RPC request for v0.3",
    "Failed to parse request params",
    "Request body: %s",
}


class _DropA2ANoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg in _A2A_NOISE:
            return False
        if record.levelno == logging.WARNING:  # a client's mistake: info, as ours
            record.levelno, record.levelname = logging.INFO, "INFO"
            return logging.getLogger(record.name).isEnabledFor(logging.INFO)
        return True


def quiet_a2a_client_errors() -> None:
    """Keep the SDK's one line per bad JSON-RPC request, at info; drop its traceback and
    body."""
    for name in (A2A_DISPATCHER_LOGGER, A2A_V03_LOGGER):
        sdk_logger = logging.getLogger(name)
        if not any(isinstance(f, _DropA2ANoise) for f in sdk_logger.filters):
            sdk_logger.addFilter(_DropA2ANoise())
