"""One MCP prompt per agent: its system prompt and the task, for a client's own model.

MCP prompt messages have no system role, so the agent's system prompt comes first as a
user message and the task follows it.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Message, UserMessage
from mcp.server.mcpserver.prompts import Prompt
from pydantic import Field

from workflows.models import AgentSpec


def agent_prompt(agent: AgentSpec) -> Prompt:
    async def render(
        input: Annotated[str, Field(min_length=1, description="The task for the agent.")],
    ) -> list[Message]:
        return [UserMessage(agent.system_prompt), UserMessage(input)]

    return Prompt.from_function(
        render,
        name=agent.name,
        title=f"Keel {agent.name} agent",
        description=agent.description or f"Keel's {agent.name} agent.",
    )
