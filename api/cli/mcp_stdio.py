"""`keel mcp`: Keel's MCP server for clients that start their servers over stdio.

Desktop assistants and IDEs launch an MCP server as a child process and talk to it
on stdin and stdout. This process is such a server, and a client of Keel's own MCP
server at `/mcp` of a running Keel (or of the embedded stack it starts when none
answers), signed in with the local credentials. Each request is passed on as it came
and each answer handed back, so the tools, resources and prompts are the ones the
HTTP server offers, with its checks, tenancy and audit: there is one implementation.

stdout carries the protocol and nothing else: the SDK's stdio transport points fd 1
at stderr while it serves, and the stack starts only once it does, so neither the
embedded servers nor a log line can break a frame.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Generator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import (
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
)

from keel.api.cli.local_stack import local_stack
from keel.api.cli.mcp_notices import StdioNotices, modern_client
from keel.api.identity.config import cli_token
from keel.worker.config.settings import Settings

# A tool call waits as long as the API takes to answer it (a search over a large tree,
# or a start_run that waits up to its MAX_WAIT_S of 300 s).
UPSTREAM_TIMEOUT_S = 330.0
Ctx = ServerRequestContext[Any, Any]


class LocalToken(httpx2.Auth):
    """The CLI's own bearer token, minted afresh for every request, so a client that
    keeps `keel mcp` running for days never sends an expired one."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response]:
        token = cli_token(self._settings)
        if token is not None:
            request.headers["authorization"] = f"Bearer {token}"
        yield request


def cursor_of(params: PaginatedRequestParams | None) -> str | None:
    return params.cursor if params is not None else None


def bridge(upstream: Client, notices: StdioNotices) -> Server[Any]:
    """A stdio-side server whose every handler asks `upstream` (Keel's `/mcp`); run
    updates, progress and log messages are relayed by `notices`."""

    async def list_tools(ctx: Ctx, params: PaginatedRequestParams | None) -> ListToolsResult:
        return await upstream.list_tools(cursor=cursor_of(params))

    async def list_resources(
        ctx: Ctx, params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return await upstream.list_resources(cursor=cursor_of(params))

    async def list_resource_templates(
        ctx: Ctx, params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        return await upstream.list_resource_templates(cursor=cursor_of(params))

    async def read_resource(ctx: Ctx, params: ReadResourceRequestParams) -> ReadResourceResult:
        return await upstream.read_resource(str(params.uri))

    async def list_prompts(ctx: Ctx, params: PaginatedRequestParams | None) -> ListPromptsResult:
        return await upstream.list_prompts(cursor=cursor_of(params))

    async def get_prompt(ctx: Ctx, params: GetPromptRequestParams) -> GetPromptResult:
        return await upstream.get_prompt(params.name, params.arguments)

    info = upstream.server_info
    with warnings.catch_warnings():
        # The logging capability is deprecated at 2026-07-28, yet handshake-era clients use it.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        server = Server(
            info.name if info else "keel",
            version=info.version if info else "",
            title=info.title if info else None,
            instructions=upstream.instructions,
            on_list_tools=list_tools,
            on_call_tool=notices.call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_resource_templates,
            on_read_resource=read_resource,
            on_subscribe_resource=notices.subscribe,
            on_unsubscribe_resource=notices.unsubscribe,
            on_subscriptions_listen=notices.listen,
            on_set_logging_level=notices.set_level,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
        )
    return server


@asynccontextmanager
async def keel_mcp_client(
    api_url: str, settings: Settings
) -> AsyncIterator[tuple[Client, StdioNotices]]:
    """A client of `/mcp` at `api_url` that signs every request with the local token,
    and the relay of what `/mcp` streams, over the same HTTP client."""
    async with (
        httpx2.AsyncClient(
            auth=LocalToken(settings), timeout=httpx2.Timeout(UPSTREAM_TIMEOUT_S)
        ) as http,
        # The initialize handshake: Keel's server is stateless, so nothing outlives a request.
        Client(
            streamable_http_client(f"{api_url}/mcp", http_client=http), mode="legacy", cache=None
        ) as upstream,
    ):
        notices = StdioNotices(modern_client(http, f"{api_url}/mcp"), upstream.call_tool)
        try:
            yield upstream, notices
        finally:
            await notices.close()


async def serve_stdio(settings: Settings) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    async with stdio_server() as (read, write):
        async with (
            local_stack(settings, reuse_running=True, ui=False) as info,
            keel_mcp_client(info.api_url, info.settings) as (upstream, notices),
        ):
            server = bridge(upstream, notices)
            await server.run(read, write, server.create_initialization_options())
