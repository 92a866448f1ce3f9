"""Keel's MCP server: Keel's agents as MCP tools and prompts, at `/mcp` of the API."""

from keel.api.mcp_server.endpoint import McpEndpoint

__all__ = ["McpEndpoint"]
