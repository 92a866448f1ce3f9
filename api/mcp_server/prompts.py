"""MCP prompts: one per agent, and `code_review` for a client's own model with Keel's tools.

MCP prompt messages have no system role, so an agent's system prompt comes first as a
user message and the task follows it.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Message, UserMessage
from mcp.server.mcpserver.prompts import Prompt
from pydantic import Field

from keel.workflows.run.agent_spec import AgentSpec

CODE_REVIEW_TASK = (
    "Review the code in the workspace `{workspace}`. Look at it with this server's "
    "list_files, read_file and search_code tools, passing workspace=`{workspace}` to each: "
    "list the files first, read the ones that matter, and cite a path:line you read for "
    "every finding. You have no `task` tool here: in a large workspace, read it part by part "
    "yourself."
)


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


def code_review_prompt(reviewer: AgentSpec) -> Prompt:
    """The review agent's instructions and a task that names the workspace and a focus,
    for a client whose own model reviews through the code tools (no run is started)."""

    async def render(
        workspace: Annotated[
            str,
            Field(
                min_length=1,
                description="The directory to review, inside the server's workspace root.",
            ),
        ],
        focus: Annotated[
            str | None,
            Field(description="What to look at most closely, e.g. 'error handling'."),
        ] = None,
    ) -> list[Message]:
        task = CODE_REVIEW_TASK.format(workspace=workspace)
        if focus:
            task += f" Focus on: {focus}."
        return [UserMessage(reviewer.system_prompt), UserMessage(task)]

    return Prompt.from_function(
        render,
        name="code_review",
        title="Code review",
        description="Review a workspace's code with your own model and Keel's read tools, "
        "following Keel's review agent's method and report format. To have Keel run the "
        "review durably instead, call start_run with agent `review`.",
    )
