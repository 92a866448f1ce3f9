"""A stand-in tool backend that is called as the user: an MCP server that records the
bearer each tool call carries, and the backend's OAuth2 token endpoint, which issues
short-lived per-user tokens by RFC 8693 token exchange (verifying Keel's subject
assertion) or for a refresh token it granted."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import jwt
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from starlette.types import Receive, Scope, Send

from keel.worker.dev_stack import free_port
from tests.conftest import JWT_SECRET

AUDIENCE = "tickets-api"
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


@dataclass
class Call:
    ticket: str
    bearer: str | None


@dataclass
class UserBackend:
    """What reached the backend: tool calls with their bearer, tokens issued per user."""

    expires_in: int = 3
    refresh_tokens: dict[str, str] = field(default_factory=dict)
    """Refresh token → the user it was granted to."""
    origin: str = ""
    calls: list[Call] = field(default_factory=list)
    issued: dict[str, str] = field(default_factory=dict)
    """Access token → `tenant/user` it was issued for."""
    grants: list[dict[str, str]] = field(default_factory=list)
    _serial: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def url(self) -> str:
        return f"{self.origin}/mcp"

    def tokens_of(self, who: str) -> set[str]:
        return {token for token, owner in self.issued.items() if owner == who}

    def calls_of(self, prefix: str) -> list[Call]:
        return [c for c in self.calls if c.ticket.startswith(prefix)]

    def app(self) -> Any:
        server = MCPServer(name="tickets", log_level="WARNING")

        @server.tool()
        def lookup(ticket: str, ctx: Context) -> str:  # type: ignore[type-arg]
            """Look up a ticket by its id, e.g. T-1."""
            request = ctx.request_context.request
            headers = getattr(request, "headers", {})
            self.calls.append(Call(ticket, headers.get("authorization")))
            return f"Ticket {ticket}: open"

        inner = server.streamable_http_app(stateless_http=True, json_response=True)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and scope["path"] == "/token":
                await self._token(receive, send)
                return
            await inner(scope, receive, send)

        return app

    async def _token(self, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        self.grants.append(form)
        owner = None
        if form.get("grant_type") == EXCHANGE:
            try:
                claims = jwt.decode(
                    form.get("subject_token", ""),
                    JWT_SECRET,
                    algorithms=["HS256"],
                    audience=AUDIENCE,
                )
                owner = f"{claims['tenant_id']}/{claims['sub']}"
            except jwt.PyJWTError:
                owner = None
        elif form.get("grant_type") == "refresh_token":
            owner = self.refresh_tokens.get(form.get("refresh_token", ""))
        if owner is None:
            await _json(send, 400, {"error": "invalid_grant"})
            return
        token = f"at-{owner.replace('/', '-')}-{next(self._serial)}"
        self.issued[token] = owner
        await _json(
            send,
            200,
            {"access_token": token, "token_type": "Bearer", "expires_in": self.expires_in},
        )


async def _json(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": data})


@asynccontextmanager
async def serving(backend: UserBackend) -> AsyncIterator[UserBackend]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(backend.app(), host="127.0.0.1", port=port, log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.05)
        assert server.started, "the stand-in backend did not start"
        backend.origin = f"http://127.0.0.1:{port}"
        yield backend
    finally:
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)


def helpdesk_file(agents_dir: Any, url: str) -> None:
    """An agent whose tickets server's lookups run without asking."""
    agents_dir.mkdir(exist_ok=True)
    server = {"name": "tickets", "url": url, "tools": ["lookup"]}
    (agents_dir / "helpdesk.md").write_text(
        "---\n"
        "name: helpdesk\n"
        "description: Answers questions about tickets.\n"
        "tools: [read_file]\n"
        f"mcp_servers: [{json.dumps(server)}]\n"
        'permissions: [{permission: "mcp:tickets:*", pattern: "*", action: allow}]\n'
        "---\n"
        "You answer questions about tickets with the tickets tools.\n"
    )
