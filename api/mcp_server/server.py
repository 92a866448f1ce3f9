"""The MCP server object: Keel's tools and one prompt per agent of the catalog."""

from __future__ import annotations

import inspect
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import ValidationError

from api.core.service import KeelService
from api.mcp_server.prompts import agent_prompt
from api.mcp_server.tool_errors import invalid_arguments
from api.mcp_server.tools import KeelTools

INSTRUCTIONS = (
    "Keel runs LLM agents durably. Call list_agents to see them, start_run to start one on a "
    "workspace, then get_run until its status is completed, failed or cancelled; the report "
    "is the agent's answer. When get_run lists pending interactions, the run waits for you: "
    "approve or reject a tool call with decide (passing the payload_hash shown), or answer "
    "a question. Each agent is also a prompt, for use with your own model."
)
READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class KeelMcpServer(MCPServer[Any]):
    """An `MCPServer` whose argument errors name each bad argument in a sentence."""

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
    server = KeelMcpServer(
        name="keel",
        title="Keel",
        description="Durable LLM agents on Temporal: reviews, investigations and approved changes.",
        instructions=INSTRUCTIONS,
        version="0.1.0",
        # MCPServer configures the root logger when nothing has; keep that to warnings.
        log_level="WARNING",
    )
    tools = KeelTools(service)
    acting = ToolAnnotations(read_only_hint=False, destructive_hint=False)
    for tool, hints in (
        (tools.list_agents, READS),
        (tools.start_run, acting),
        (tools.get_run, READS),
        (tools.list_runs, READS),
        (tools.decide, acting),
    ):
        # The docstring is the description a client's model reads.
        server.add_tool(
            tool, name=tool.__name__, description=inspect.getdoc(tool), annotations=hints
        )
    for agent in service.parts.catalog.all():
        server.add_prompt(agent_prompt(agent))
    return server
