"""Reading a workspace for a caller outside any run: the agents' own read tools.

An MCP client (a desktop assistant, an IDE) looks at code with `read_file`,
`list_files` and `search_code`. They are the implementations the agents use, behind
the same two checks: the workspace must lie inside `KEEL_WORKSPACE_ROOT` (as for
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
from keel.api.core.runs import resolve_workspace
from keel.workflows.gate.tool_specs import ListFilesArgs, ReadFileArgs, SearchCodeArgs, ToolArgs

ArgsT = TypeVar("ArgsT", bound=ToolArgs)


class WorkspaceReads:
    """The read-only file tools on a workspace inside the root."""

    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts

    async def read_file(self, workspace: str, args: ReadFileArgs) -> ToolOutput:
        return await self._run(read_file, workspace, args)

    async def list_files(self, workspace: str, args: ListFilesArgs) -> ToolOutput:
        return await self._run(list_files, workspace, args)

    async def search_code(self, workspace: str, args: SearchCodeArgs) -> ToolOutput:
        return await self._run(search_code, workspace, args)

    async def _run(
        self, tool: Callable[[Workspace, ArgsT], ToolOutput], workspace: str, args: ArgsT
    ) -> ToolOutput:
        """The tool on the checked workspace, in a thread: file reads block and a search
        may take seconds, which must not stall the API's event loop."""
        root = resolve_workspace(workspace, self._parts.settings.workspace_root)
        return await asyncio.to_thread(tool, Workspace(root), args)
