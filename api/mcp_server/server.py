"""The MCP server object: Keel's run and code tools, its resources, and its prompts."""

from __future__ import annotations

import inspect
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_REQUEST,
    CallToolResult,
    EmptyResult,
    GetPromptRequestParams,
    GetPromptResult,
    InputRequiredResult,
    ListPromptsResult,
    ListResourcesResult,
    PaginatedRequestParams,
    ServerCapabilities,
    SetLevelRequestParams,
    SubscriptionsListenRequestParams,
    ToolAnnotations,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from keel.api.core.service import KeelService
from keel.api.mcp_server.code_tools import CodeTools
from keel.api.mcp_server.listen import RunListen
from keel.api.mcp_server.prompts import agent_prompt, code_review_prompt
from keel.api.mcp_server.resources import KeelResources
from keel.api.mcp_server.run_wait import RunWait
from keel.api.mcp_server.tool_errors import invalid_arguments
from keel.api.mcp_server.tools import KeelTools, principal_of

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

    def _prompts_withheld(self, ctx: ServerRequestContext[Any]) -> set[str]:
        """The prompts of agents the caller's roles may not use (their system prompts)."""
        access = self._keel_resources.service.access
        user = principal_of(ctx.request)
        withheld = {a.name for a in access.catalog_agents() if not access.admits(a, user)}
        if "review" in withheld:
            withheld.add("code_review")  # the review agent's instructions
        return withheld

    async def _handle_list_prompts(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListPromptsResult:
        withheld = self._prompts_withheld(ctx)
        return ListPromptsResult(
            prompts=[p for p in await self.list_prompts() if p.name not in withheld]
        )

    async def _handle_get_prompt(
        self, ctx: ServerRequestContext[Any], params: GetPromptRequestParams
    ) -> GetPromptResult | InputRequiredResult:
        if params.name in self._prompts_withheld(ctx):
            raise ValueError(f"Unknown prompt: {params.name}")  # as for a prompt not there
        return await super()._handle_get_prompt(ctx, params)

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
    """The server for one app: its tools use the app's service, its prompts the catalog;
    run changes come from the app's event hub."""
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
        # Keel serves `subscriptions/listen` itself (below), per tenant, from its event hub.
        subscriptions=False,
    )
    declare_run_changes(server, service)
    tools = KeelTools(service, RunWait(service))
    code = CodeTools(service)
    acting = ToolAnnotations(read_only_hint=False, destructive_hint=False)
    for tool, hints in (
        (tools.list_agents, READS),
        (tools.start_run, acting),
        (tools.get_run, READS),
        (tools.list_runs, READS),
        (tools.decide, acting),
        (tools.fork_run, acting),
        (code.list_files, READS),
        (code.read_file, READS),
        (code.search_code, READS),
    ):
        # The docstring is the description a client's model reads.
        server.add_tool(
            tool, name=tool.__name__, description=inspect.getdoc(tool), annotations=hints
        )
    resources.register(server)
    catalog = service.catalog
    for agent in catalog.all():
        server.add_prompt(agent_prompt(agent))
    reviewer = catalog.get("review")
    if reviewer is not None:
        server.add_prompt(code_review_prompt(reviewer))
    return server


STATELESS_LOG_LEVEL = (
    "Over HTTP Keel's MCP server is stateless, so a log level cannot outlive the request "
    "that sets it. Ask for log messages per request (protocol 2026-07-28: the "
    "io.modelcontextprotocol/logLevel key in _meta), or use `keel mcp` over stdio, which "
    "keeps your level."
)


def declare_run_changes(server: KeelMcpServer, service: KeelService) -> None:
    """Serve what a stateless HTTP server can deliver, and declare only that.

    2026-07-28 clients get `subscriptions/listen` (run updates on the request's own
    stream) and log messages per request. Handshake-era clients get progress on a
    tool call's stream, but neither `resources/subscribe` (no session holds it, and no
    standalone stream carries its notifications) nor `logging/setLevel` (no session
    holds the level): they are not declared to them.
    """
    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler(
        "subscriptions/listen", SubscriptionsListenRequestParams, RunListen(service)
    )

    async def set_level(ctx: object, params: SetLevelRequestParams) -> EmptyResult:
        raise MCPError(INVALID_REQUEST, STATELESS_LOG_LEVEL)

    # Registered so that 2026-07-28 discovery declares `logging` (delivered per request).
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
    derived = lowlevel.get_capabilities

    def capabilities(
        *args: Any, protocol_version: str | None = None, **kw: Any
    ) -> ServerCapabilities:
        declared = derived(*args, protocol_version=protocol_version, **kw)
        if protocol_version not in MODERN_PROTOCOL_VERSIONS:
            declared.logging = None
        return declared

    # The SDK derives capabilities from registered handlers alone; this server's differ
    # by protocol era, so the instance's derivation is wrapped rather than the class's.
    lowlevel.get_capabilities = capabilities  # type: ignore[method-assign]
