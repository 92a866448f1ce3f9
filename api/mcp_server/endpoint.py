"""`/mcp`: the caller is verified as on every REST route, then the MCP SDK answers.

The server is stateless (streamable HTTP without sessions, JSON answers): every
request carries its own token and stands alone, so any API replica can answer it,
and what a run is lives in Temporal and Postgres, never in this process.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, LOG_LEVEL_META_KEY
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from keel.api.core.errors import KeelError
from keel.api.core.service import KeelService
from keel.api.http.errors import headers_of, status_of
from keel.api.mcp_server.auth_discovery import challenge
from keel.api.mcp_server.server import keel_mcp_server
from keel.worker.config.settings import Settings

PATH = "/mcp"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class McpEndpoint:
    """The ASGI app at `/mcp`; `serving` runs its MCP session manager in the app's lifespan."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._manager: StreamableHTTPSessionManager | None = None
        self._streaming: StreamableHTTPSessionManager | None = None
        self._service: KeelService | None = None

    @asynccontextmanager
    async def serving(self, service: KeelService) -> AsyncIterator[None]:
        """Serve MCP while the context is open; the tools call `service`, and run changes
        come from its events."""
        self._service = service
        server = keel_mcp_server(service)
        # Builds the session manager; its Starlette app is not used, this endpoint is.
        server.streamable_http_app(
            streamable_http_path=PATH,
            stateless_http=True,
            json_response=True,
            transport_security=transport_security(self._settings),
            max_request_body_size=self._settings.max_body_bytes,
        )
        manager = server.session_manager
        # The same server, answering on an event stream: for the requests that asked for
        # notifications (progress, log messages, subscriptions/listen).
        streaming = StreamableHTTPSessionManager(
            server._lowlevel_server,
            json_response=False,
            stateless=True,
            security_settings=transport_security(self._settings),
            max_request_body_size=self._settings.max_body_bytes,
        )
        async with manager.run(), streaming.run():
            self._manager = manager
            self._streaming = streaming
            try:
                yield
            finally:
                self._manager = None
                self._streaming = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        service = self._service
        if service is None:
            await _refusal(503, "The MCP server is starting or stopping; try again shortly.")(
                scope, receive, send
            )
            return
        try:
            principal = await service.authenticate(
                request.headers.get("authorization"),
                path=request.url.path,
                client=request.client.host if request.client else None,
            )
        except KeelError as exc:
            headers = headers_of(exc)
            if "WWW-Authenticate" in headers:
                # Points a client at the protected-resource metadata, where there is any.
                headers["WWW-Authenticate"] = challenge(self._settings, request)
            await _refusal(status_of(exc), exc.message, headers)(scope, receive, send)
            return
        if request.method != "POST":
            # No server-initiated messages and no sessions: no stream to open (GET) and no
            # session to end (DELETE), so say so rather than hold a silent stream open.
            await _refusal(
                405,
                "Keel's MCP server is stateless: send each JSON-RPC message in a POST.",
                {"Allow": "POST"},
            )(scope, receive, send)
            return
        manager = self._manager
        streaming = self._streaming
        if manager is None or streaming is None:
            await _refusal(503, "The MCP server is starting or stopping; try again shortly.")(
                scope, receive, send
            )
            return
        # The tools read the caller from the request each MCP message arrives with.
        request.state.principal = principal
        raw = await request.body()
        refusal = malformed_id(raw)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        chosen = streaming if wants_stream(raw) else manager
        await chosen.handle_request(scope, _replay(raw, receive), send)


def wants_stream(raw: bytes) -> bool:
    """Whether a message asked for notifications before its answer: a progress token, a
    log level (2026-07-28), or a `subscriptions/listen`, whose answer is a stream. Every
    other answer stays one JSON body, as simple clients (and curl) expect."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    messages = body if isinstance(body, list) else [body]
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("method") == "subscriptions/listen":
            return True
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and ("progressToken" in meta or LOG_LEVEL_META_KEY in meta):
            return True
    return False


def malformed_id(raw: bytes) -> JSONResponse | None:
    """A message whose `id` is neither a string nor an integer is no valid request, yet the
    SDK takes it for a notification and answers 202 with no body: say what is wrong."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return None  # the SDK answers a parse error itself
    messages = body if isinstance(body, list) else [body]
    for message in messages:
        if not isinstance(message, dict) or "id" not in message:
            continue
        value = message["id"]
        if type(value) not in (str, int):
            return JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {
                        "code": INVALID_REQUEST,
                        "message": "A JSON-RPC request's id is a string or an integer, not "
                        f"{type(value).__name__ if value is not None else 'null'}.",
                    },
                },
                status_code=400,
            )
    return None


def _replay(raw: bytes, receive_more: Receive) -> Receive:
    """A `receive` that hands the SDK the body this endpoint has already read, then
    whatever the client does next (a disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return await receive_more()
        sent = True
        return {"type": "http.request", "body": raw, "more_body": False}

    return receive


def transport_security(settings: Settings) -> TransportSecuritySettings | None:
    """While the API listens on loopback only, answer only requests addressed to it by a
    loopback name (or the public URL): a web page cannot then reach a local Keel, whose
    auth may be off, by rebinding a name of its own to 127.0.0.1."""
    if settings.api_host not in LOOPBACK_HOSTS:
        return None
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    public = urlsplit(settings.public_url or "")
    if public.netloc:
        hosts.append(public.netloc)
        origins.append(f"{public.scheme}://{public.netloc}")
    return TransportSecuritySettings(allowed_hosts=hosts, allowed_origins=origins)


def _refusal(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """A JSON-RPC error, so MCP clients show the sentence, with the REST API's `detail` too."""
    code = INTERNAL_ERROR if status >= 500 else INVALID_REQUEST
    return JSONResponse(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": code, "message": message},
            "detail": message,
        },
        status_code=status,
        headers=headers,
    )
