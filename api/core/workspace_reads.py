"""Reading a workspace for a caller outside any run: the agents' own read tools.

An MCP client (a desktop assistant, an IDE) looks at code with `read_file`,
`list_files` and `search_code`. They are the implementations the agents use, behind
the same two checks: the workspace must be one of the caller's tenant's (inside
`KEEL_WORKSPACE_ROOT`, or its tenant's directory there: `api.core.workspaces`, as for
starting a run), and every path must stay inside the workspace (symlinks included).
Nothing here writes, so there is nothing to approve.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from keel.activities.tools.file_tools import ToolOutput, list_files, read_file, search_code
from keel.activities.tools.workspace import Workspace
from keel.api.core.context import CoreParts
from keel.api.core.workspaces import TenantWorkspaces
from keel.api.identity.auth import Principal
from keel.workflows.gate.tool_specs import ListFilesArgs, ReadFileArgs, SearchCodeArgs, ToolArgs

ArgsT = TypeVar("ArgsT", bound=ToolArgs)


class WorkspaceReads:
    """The read-only file tools on a workspace inside the root."""

    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts
        self._workspaces = TenantWorkspaces(parts)

    async def read_file(self, workspace: str, args: ReadFileArgs, user: Principal) -> ToolOutput:
        return await self._run(read_file, workspace, args, user)

    async def list_files(self, workspace: str, args: ListFilesArgs, user: Principal) -> ToolOutput:
        return await self._run(list_files, workspace, args, user)

    async def search_code(
        self, workspace: str, args: SearchCodeArgs, user: Principal
    ) -> ToolOutput:
        return await self._run(search_code, workspace, args, user)

    async def _run(
        self,
        tool: Callable[[Workspace, ArgsT], ToolOutput],
        workspace: str,
        args: ArgsT,
        user: Principal,
    ) -> ToolOutput:
        """The tool on the checked workspace, in a thread: file reads block and a search
        may take seconds, which must not stall the API's event loop."""
        root = await self._workspaces.resolve(workspace, user)
        return await asyncio.to_thread(tool, Workspace(root), args)
