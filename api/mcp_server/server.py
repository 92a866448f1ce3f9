"""The MCP server object: Keel's run and code tools, its resources, and its prompts."""

from __future__ import annotations

import inspect
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import (
    CallToolResult,
    InputRequiredResult,
    ListResourcesResult,
    PaginatedRequestParams,
    ToolAnnotations,
)
from pydantic import ValidationError

from api.core.service import KeelService
from api.mcp_server.code_tools import CodeTools
from api.mcp_server.prompts import agent_prompt, code_review_prompt
from api.mcp_server.resources import KeelResources
from api.mcp_server.tool_errors import invalid_arguments
from api.mcp_server.tools import KeelTools, principal_of

INSTRUCTIONS = (
    "Keel runs LLM agents durably. Call list_agents to see them, start_run to start one on a "
    "workspace, then get_run until its status is completed, failed or cancelled; the report "
    "is the agent's answer. When get_run lists pending interactions, the run waits for you: "
    "approve or reject a tool call with decide (passing the payload_hash shown), or answer "
    "a question. To look at code yourself, use list_files, read_file and search_code on a "
    "workspace. Resources name the agents, your recent runs and their reports. Each agent is "
    "also a prompt, and code_review reviews a workspace with your own model."
)
READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class KeelMcpServer(MCPServer[Any]):
    """An `MCPServer` whose argument errors name each bad argument in a sentence, and
    whose resource listing is the caller's (their tenant's recent runs)."""

    def __init__(self, resources: KeelResources, **options: Any) -> None:
        self._keel_resources = resources
        super().__init__(**options)

    async def _handle_list_resources(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        # MCPServer lists only static resources and hands its listing no caller; runs
        # are per tenant, so this one listing reads who is asking.
        return ListResourcesResult(
            resources=await self._keel_resources.listed(principal_of(ctx.request))
        )

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            # Prefixed like every other tool error the SDK reports.
            raise ToolError(
                f"Error executing tool {name}: {invalid_arguments(name, cause)}"
            ) from cause


def keel_mcp_server(service: KeelService) -> KeelMcpServer:
    """The server for one app: its tools use the app's service, its prompts the catalog."""
    resources = KeelResources(service)
    server = KeelMcpServer(
        resources,
        name="keel",
        title="Keel",
        description="Durable LLM agents on Temporal: reviews, investigations and approved changes.",
        instructions=INSTRUCTIONS,
        version="0.1.0",
        # MCPServer configures the root logger when nothing has; keep that to warnings.
        log_level="WARNING",
        # Stateless JSON answers carry no stream, so no `subscriptions/listen`: without
        # it, a 2026-07-28 client is not told of change notifications that never come.
        subscriptions=False,
    )
    tools = KeelTools(service)
    code = CodeTools(service)
    acting = ToolAnnotations(read_only_hint=False, destructive_hint=False)
    for tool, hints in (
        (tools.list_agents, READS),
        (tools.start_run, acting),
        (tools.get_run, READS),
        (tools.list_runs, READS),
        (tools.decide, acting),
        (code.list_files, READS),
        (code.read_file, READS),
        (code.search_code, READS),
    ):
        # The docstring is the description a client's model reads.
        server.add_tool(
            tool, name=tool.__name__, description=inspect.getdoc(tool), annotations=hints
        )
    resources.register(server)
    catalog = service.parts.catalog
    for agent in catalog.all():
        server.add_prompt(agent_prompt(agent))
    reviewer = catalog.get("review")
    if reviewer is not None:
        server.add_prompt(code_review_prompt(reviewer))
    return server
