"""Discovery: at a run's start, list the tools of its agent's MCP servers.

The definitions (description, input schema, where to call) go to Postgres, keyed
by run; the workflow gets the model-visible names and the servers that were down.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mcp_types import Tool
from temporalio import activity
from temporalio.exceptions import ApplicationError

from keel.activities.credentials.secret_store import SecretStore
from keel.activities.credentials.user_tokens import CredentialNeeded
from keel.activities.store.mcp_tool_store import McpToolRecord, McpToolStore
from keel.activities.tools.mcp_client import ActingFor, McpClient, McpUnavailable
from keel.workflows.activity_refs import McpDiscovery
from keel.workflows.gate.mcp_models import (
    CredentialAsk,
    McpDiscoveryInput,
    McpDiscoveryResult,
    McpServerSpec,
)
from keel.workflows.gate.mcp_tools import mcp_tool_name
from keel.workflows.timeouts import MCP_DISCOVERY_ATTEMPTS

log = logging.getLogger("keel.mcp")

# A request offers at most 128 tools; the built-ins take a few of them.
MAX_MCP_TOOLS = 100
MAX_DESCRIPTION_CHARS = 4_000


class McpDiscoveryActivities(McpDiscovery):
    """Lists servers' tools with the MCP client and stores what the model calls need."""

    def __init__(
        self, client: McpClient, tools: McpToolStore, *, secrets: SecretStore | None = None
    ) -> None:
        self._client = client
        self._tools = tools
        self._secrets = secrets

    @activity.defn(name="discover_mcp_tools")
    async def discover_mcp_tools(self, request: McpDiscoveryInput) -> McpDiscoveryResult:
        acting_for = (
            (request.tenant_id, request.requester)
            if request.tenant_id is not None and request.requester is not None
            else None
        )
        if acting_for is not None:
            await self._adopt(request, acting_for)
        asks: list[CredentialAsk] = []
        listed = await asyncio.gather(
            *(self._list(server, acting_for, asks) for server in request.servers)
        )
        asked = {a.server for a in asks}
        down = [
            s.name
            for s, tools in zip(request.servers, listed, strict=True)
            if tools is None and s.name not in asked
        ]
        if down and activity.info().attempt < MCP_DISCOVERY_ATTEMPTS:
            raise ApplicationError(
                f"MCP servers not reachable yet: {', '.join(down)}", type="McpUnavailable"
            )
        records: list[McpToolRecord] = []
        for server, tools in zip(request.servers, listed, strict=True):
            for tool in tools or []:
                if server.tools is not None and tool.name not in server.tools:
                    continue
                record = _record(server, tool)
                if any(r.name == record.name for r in records):
                    log.warning("MCP tool %s of %s: name taken, skipped", tool.name, server.name)
                elif len(records) >= MAX_MCP_TOOLS:
                    log.warning("run %s: more than %d MCP tools", request.run_id, MAX_MCP_TOOLS)
                else:
                    records.append(record)
        await self._tools.replace(request.run_id, records)
        return McpDiscoveryResult(
            tools=[r.name for r in records], unavailable=down, needs_credential=asks
        )

    async def _adopt(self, request: McpDiscoveryInput, acting_for: ActingFor) -> None:
        """Keep the credentials the user gave (by reference) as theirs for those servers."""
        by_name = {s.name: s for s in request.servers}
        for name, ref in request.credential_refs.items():
            server = by_name.get(name)
            if server is None or self._secrets is None:
                continue
            value = await self._secrets.get(ref, acting_for[0], request.run_id)
            if value is not None:
                await self._client.adopt(server.url, acting_for, value)
                await self._secrets.discard(ref)

    async def _list(
        self, server: McpServerSpec, acting_for: ActingFor | None, asks: list[CredentialAsk]
    ) -> list[Tool] | None:
        try:
            return await self._client.list_tools(server.url, acting_for)
        except CredentialNeeded as need:
            asks.append(CredentialAsk(server=server.name, prompt=need.prompt))
            return None
        except McpUnavailable as exc:
            log.warning("MCP server %s at %s: %s", server.name, server.url, exc)
            return None


def _record(server: McpServerSpec, tool: Tool) -> McpToolRecord:
    description = tool.description or tool.title or f"Tool {tool.name} of {server.name}."
    return McpToolRecord(
        name=mcp_tool_name(server.name, tool.name),
        server=server.name,
        url=server.url,
        tool=tool.name,
        description=description[:MAX_DESCRIPTION_CHARS],
        input_schema=_parameters(tool.input_schema),
    )


def _parameters(schema: dict[str, Any] | None) -> dict[str, Any]:
    """The tool's input schema as function parameters: always an object schema."""
    parameters = dict(schema or {})
    parameters.setdefault("type", "object")
    if parameters["type"] == "object":
        parameters.setdefault("properties", {})
    return parameters
