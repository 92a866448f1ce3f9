"""The MCP tools each run discovered: definitions for the model, addresses for the calls."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field


class McpToolRecord(BaseModel):
    """One discovered tool of one run."""

    name: str = Field(description="The name the model sees: `mcp__<server>__<tool>`.")
    server: str = Field(description="The agent's name for the server.")
    url: str = Field(description="The server's streamable HTTP endpoint.")
    tool: str = Field(description="The server's own name for the tool.")
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict)

    def definition(self) -> dict[str, Any]:
        """The tool as a chat completion request offers it."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema,
            },
        }


class McpToolStore:
    """Writes replace a run's whole set, so a retried discovery leaves exactly its own."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool

    async def replace(self, run_id: str, tools: list[McpToolRecord]) -> None:
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute("DELETE FROM mcp_tools WHERE run_id = %s", (run_id,))
            for position, tool in enumerate(tools):
                await conn.execute(
                    "INSERT INTO mcp_tools (run_id, name, position, server, url, tool,"
                    " description, input_schema) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        run_id,
                        tool.name,
                        position,
                        tool.server,
                        tool.url,
                        tool.tool,
                        tool.description,
                        Jsonb(tool.input_schema),
                    ),
                )

    async def for_run(self, run_id: str) -> list[McpToolRecord]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT name, server, url, tool, description, input_schema FROM mcp_tools"
                " WHERE run_id = %s ORDER BY position",
                (run_id,),
            )
            rows = await cur.fetchall()
        return [McpToolRecord.model_validate(row) for row in rows]

    async def get(self, run_id: str, name: str) -> McpToolRecord | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT name, server, url, tool, description, input_schema FROM mcp_tools"
                " WHERE run_id = %s AND name = %s",
                (run_id, name),
            )
            row = await cur.fetchone()
        return McpToolRecord.model_validate(row) if row else None
