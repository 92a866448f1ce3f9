"""Agents as clients list them."""

from __future__ import annotations

from pydantic import BaseModel, Field

from keel.workflows.gate.tool_specs import TOOL_SPECS
from keel.workflows.router.models import ROUTER_AGENT
from keel.workflows.run.agent_spec import AgentSpec


class AgentPublic(BaseModel):
    name: str
    description: str
    tools: list[str]
    model: str | None
    mcp_servers: list[str] = Field(
        default_factory=list, description="Names of the MCP servers whose tools it uses."
    )
    read_only: bool = Field(
        default=False,
        description="Whether every tool it has only reads (no writes, commands, questions, "
        "sub-agents or MCP tools); the console's forms start with such an agent selected.",
    )

    @classmethod
    def from_spec(cls, agent: AgentSpec) -> AgentPublic:
        return cls(
            name=agent.name,
            description=agent.description,
            tools=agent.tools,
            model=agent.model,
            mcp_servers=[server.name for server in agent.mcp_servers],
            # The router has no tools of its own, but the agent it picks may act.
            read_only=agent.name != ROUTER_AGENT
            and not agent.mcp_servers
            and all(tool in TOOL_SPECS and TOOL_SPECS[tool].read_only for tool in agent.tools),
        )
