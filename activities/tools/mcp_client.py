"""The MCP client: lists and calls the tools of external servers over streamable HTTP.

Each use opens its own connection with the `mcp` SDK's `Client`, sending the
bearer token configured for the server's URL (`KEEL_MCP_TOKENS`), or, for a server
called as the user (`KEEL_USER_CREDENTIALS`), the run's user's own. Tokens stay in
this process: never in a workflow payload, an event, an error text or a log line.
What a server answers is untrusted text, handed to the model as a tool output.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
)
from pydantic import SecretStr

from keel.activities.credentials.user_tokens import (
    CredentialNeeded,
    CredentialRefused,
    UserTokens,
)
from keel.activities.outbound.url_prefix import longest_prefix
from keel.activities.tools.file_tools import ToolOutput

log = logging.getLogger("keel.mcp")

# A server that pages forever cannot hold a run's start.
MAX_LIST_PAGES = 20
# A tool output beyond this is cut: the model's context is worth more.
MAX_OUTPUT_CHARS = 100_000
REASON_CHARS = 300


class McpUnavailable(Exception):
    """A server could not be reached or did not speak MCP; retrying later may help."""


def token_for(tokens: Mapping[str, SecretStr], url: str) -> str | None:
    """The token of the longest configured URL that `url` lies under (`url_prefix`).

    `https://mcp.example.com` covers `https://mcp.example.com/mcp`, never
    `https://mcp.example.com.evil.net/` nor another port.
    """
    prefix = longest_prefix(url, tokens)
    return tokens[prefix].get_secret_value() if prefix is not None else None


def reason(exc: BaseException) -> str:
    """A short account of a failure, from the innermost first error of any group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip() or "no details"
    return f"{type(exc).__name__}: {text}"[:REASON_CHARS]


ActingFor = tuple[str, str]
"""The run's tenant and user (`user:ID`), for servers called as the user."""


class McpClient:
    """Connections to MCP servers, one per use; retries belong to Temporal."""

    def __init__(
        self,
        tokens: Mapping[str, SecretStr],
        timeout_s: float,
        *,
        user_tokens: UserTokens | None = None,
    ) -> None:
        self._tokens = dict(tokens)
        self._timeout_s = timeout_s
        self._user_tokens = user_tokens

    async def list_tools(self, url: str, acting_for: ActingFor | None = None) -> list[Tool]:
        """Every tool the server lists; raises `McpUnavailable` if it cannot, and
        `CredentialNeeded` when the server is called as a user who has given none."""
        try:
            token = await self._bearer(url, acting_for)
        except CredentialRefused as exc:
            raise McpUnavailable(str(exc)) from None
        try:
            async with self._connected(url, token) as client:
                tools: list[Tool] = []
                cursor: str | None = None
                for _ in range(MAX_LIST_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                return tools
        except Exception as exc:
            raise McpUnavailable(reason(exc)) from exc

    async def call_tool(
        self,
        url: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        before_call: Callable[[], Awaitable[ToolOutput | None]],
        acting_for: ActingFor | None = None,
    ) -> ToolOutput:
        """Connect, let `before_call` claim the call (or answer instead), then call.

        Connecting comes first, so a server that is down is reported without the call
        being claimed. Failures become an error output the model reads; only errors of
        `before_call` (Postgres) propagate, for Temporal to retry.
        """
        try:
            token = await self._bearer(url, acting_for)
        except CredentialNeeded:
            return ToolOutput(
                text=(
                    f"Error: {tool} is called as the run's user, who has not given a "
                    "credential for it, so it did not run. Do without it; the user is asked "
                    "for one when a run of this agent starts."
                ),
                is_error=True,
            )
        except CredentialRefused as exc:
            return ToolOutput(text=f"Error: {exc} {tool} did not run.", is_error=True)
        stack = AsyncExitStack()
        try:
            client = await stack.enter_async_context(self._connected(url, token))
        except Exception as exc:
            await _close(stack, url)
            return ToolOutput(
                text=(
                    f"Error: the MCP server at {url} could not be reached ({reason(exc)}), so "
                    f"{tool} did not run. Try again later, or do without it."
                ),
                is_error=True,
            )
        try:
            answered = await before_call()
            if answered is not None:
                return answered
            try:
                result = await client.call_tool(tool, arguments)
            except MCPError as exc:
                return ToolOutput(
                    text=f"Error: the MCP server refused the call to {tool}: {reason(exc)}",
                    is_error=True,
                )
            except Exception as exc:
                return ToolOutput(
                    text=(
                        f"Error: the call to {tool} on the MCP server at {url} failed "
                        f"({reason(exc)}); whether it took effect is unknown."
                    ),
                    is_error=True,
                )
            return tool_output(tool, result)
        finally:
            await _close(stack, url)

    async def adopt(self, url: str, acting_for: ActingFor, secret: str) -> None:
        """Keep `secret`, which the user gave, as their credential for the server at `url`."""
        if self._user_tokens is not None:
            await self._user_tokens.adopt(url, *acting_for, secret)

    async def _bearer(self, url: str, acting_for: ActingFor | None) -> str | None:
        """The user's token for a server called as the user, else the worker-wide one."""
        if self._user_tokens is None or not self._user_tokens.as_user(url):
            return token_for(self._tokens, url)
        if acting_for is None:
            raise CredentialRefused(
                f"The MCP server at {url} is called as the user, and this call names none.",
                retryable=False,
            )
        return await self._user_tokens.bearer(url, *acting_for)

    @asynccontextmanager
    async def _connected(self, url: str, token: str | None) -> AsyncIterator[Client]:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(self._timeout_s)) as http,
            Client(
                streamable_http_client(url, http_client=http),
                cache=None,
                read_timeout_seconds=self._timeout_s,
            ) as client,
        ):
            yield client


async def _close(stack: AsyncExitStack, url: str) -> None:
    try:
        await stack.aclose()
    except Exception as exc:  # the answer is in hand; a messy hang-up changes nothing
        log.warning("closing the MCP connection to %s: %s", url, reason(exc))


def tool_output(tool: str, result: CallToolResult) -> ToolOutput:
    """A tool result as the model reads it: text joined, other content described."""
    parts = [_describe(item) for item in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts) or "(the tool returned no content)"
    if len(text) > MAX_OUTPUT_CHARS:
        text = f"{text[:MAX_OUTPUT_CHARS]}\n… [{len(text) - MAX_OUTPUT_CHARS} more characters cut]"
    if result.is_error:
        return ToolOutput(text=f"Error: the tool {tool} reported an error: {text}", is_error=True)
    return ToolOutput(text=text)


def _describe(item: object) -> str:
    if isinstance(item, TextContent):
        return item.text
    if isinstance(item, ImageContent):
        return f"[image: {item.mime_type}, {_decoded_size(item.data)} bytes, not shown]"
    if isinstance(item, AudioContent):
        return f"[audio: {item.mime_type}, {_decoded_size(item.data)} bytes, not shown]"
    if isinstance(item, ResourceLink):
        title = f" ({item.name})" if item.name else ""
        return f"[resource link: {item.uri}{title}]"
    if isinstance(item, EmbeddedResource):
        resource = item.resource
        if isinstance(resource, TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        if isinstance(resource, BlobResourceContents):
            kind = resource.mime_type or "binary"
            return f"[resource {resource.uri}: {kind}, {_decoded_size(resource.blob)} bytes]"
    return f"[{type(item).__name__} content, not shown]"


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)
