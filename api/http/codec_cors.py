"""CORS for the codec endpoint only, so the Temporal Web UI can call it from its origin.

The UI sends the payloads with `Content-Type: application/json`, an `X-Namespace`
header and (when told to pass the user's token) `Authorization`, so the browser asks
first with a preflight that carries no token. Only `/v1/codec/*` answers it, and only
for the configured UI origins; the rest of the API stays same-origin.
"""

from __future__ import annotations

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CODEC_PREFIX = "/v1/codec/"
ALLOW_HEADERS = "Authorization, Content-Type, X-Namespace"
PREFLIGHT_MAX_AGE_S = "600"


class CodecCors:
    """ASGI middleware: preflights and CORS headers on `/v1/codec/*` for allowed origins."""

    def __init__(self, app: ASGIApp, origins: list[str]) -> None:
        self.app = app
        self.origins = frozenset(o.rstrip("/") for o in origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(CODEC_PREFIX):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin not in self.origins:
            await self.app(scope, receive, send)  # same-origin, the CLI, or refused by the browser
            return
        allow = {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Credentials": "true",
            "Vary": "Origin",
        }
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            preflight = {
                **allow,
                "Access-Control-Allow-Methods": "POST, OPTIONS",
                "Access-Control-Allow-Headers": ALLOW_HEADERS,
                "Access-Control-Max-Age": PREFLIGHT_MAX_AGE_S,
            }
            await Response(status_code=204, headers=preflight)(scope, receive, send)
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(allow)
            await send(message)

        await self.app(scope, receive, send_with_cors)


def codec_origins(configured: list[str], ui_port: int) -> list[str]:
    """The configured UI origins and the embedded UI's."""
    return [*configured, f"http://localhost:{ui_port}", f"http://127.0.0.1:{ui_port}"]
