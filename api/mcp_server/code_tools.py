"""The MCP code tools: read, list and search files of a workspace, as the agents do.

They answer with the agents' own text (numbered lines, `path:line: text`), so a
client's model reads code exactly as a Keel agent would. A path outside the workspace,
a workspace outside the root, or a missing file is a tool error with the sentence
that says what to do instead.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field, ValidationError

from keel.activities.tools.file_tools import ToolOutput
from keel.api.core.errors import KeelError
from keel.api.core.service import KeelService
from keel.api.mcp_server.tool_errors import invalid_arguments, refusal
from keel.api.mcp_server.tools import caller
from keel.workflows.gate.tool_specs import ListFilesArgs, ReadFileArgs, SearchCodeArgs

WorkspaceArg = Annotated[
    str,
    Field(
        description="The directory to look at: absolute, or relative to your workspace "
        "root (the server's, or your tenant's directory in it), and inside that root."
    ),
]


def described(model: type[BaseModel], name: str) -> str:
    """The description the agents' tool schema gives an argument, so both read alike."""
    return model.model_fields[name].description or name


def answer(output: ToolOutput) -> str:
    if output.is_error:
        raise ToolError(output.text.removeprefix("Error: "))
    return output.text


class CodeTools:
    """The read-only workspace tools, bound to the API's one service."""

    def __init__(self, service: KeelService) -> None:
        self._reads = service.workspaces

    async def read_file(
        self,
        ctx: Context,
        workspace: WorkspaceArg,
        path: Annotated[str, Field(description=described(ReadFileArgs, "path"))],
        start_line: Annotated[int, Field(description=described(ReadFileArgs, "start_line"))] = 1,
        end_line: Annotated[
            int | None, Field(description=described(ReadFileArgs, "end_line"))
        ] = None,
    ) -> str:
        """Read a text file of a workspace, or a range of its lines, with line numbers.
        Long files are cut at 256 KB with a note saying which start_line continues."""
        user = caller(ctx)
        try:
            args = ReadFileArgs(path=path, start_line=start_line, end_line=end_line)
        except ValidationError as exc:
            raise ToolError(invalid_arguments("read_file", exc)) from None
        return answer(await self._call(self._reads.read_file(workspace, args, user)))

    async def list_files(
        self,
        ctx: Context,
        workspace: WorkspaceArg,
        pattern: Annotated[str, Field(description=described(ListFilesArgs, "pattern"))] = "**/*",
        path: Annotated[str, Field(description=described(ListFilesArgs, "path"))] = ".",
    ) -> str:
        """List the files of a workspace matching a glob, with their sizes; skips .git,
        node_modules, virtualenvs and caches."""
        user = caller(ctx)
        try:
            args = ListFilesArgs(pattern=pattern, path=path)
        except ValidationError as exc:
            raise ToolError(invalid_arguments("list_files", exc)) from None
        return answer(await self._call(self._reads.list_files(workspace, args, user)))

    async def search_code(
        self,
        ctx: Context,
        workspace: WorkspaceArg,
        pattern: Annotated[str, Field(description=described(SearchCodeArgs, "pattern"))],
        path: Annotated[str, Field(description=described(SearchCodeArgs, "path"))] = ".",
        glob: Annotated[str | None, Field(description=described(SearchCodeArgs, "glob"))] = None,
        max_results: Annotated[
            int, Field(description=described(SearchCodeArgs, "max_results"))
        ] = 100,
    ) -> str:
        """Search a workspace's files for a regular expression; answers `path:line: text`
        lines, capped at max_results."""
        user = caller(ctx)
        try:
            args = SearchCodeArgs(pattern=pattern, path=path, glob=glob, max_results=max_results)
        except ValidationError as exc:
            raise ToolError(invalid_arguments("search_code", exc)) from None
        return answer(await self._call(self._reads.search_code(workspace, args, user)))

    @staticmethod
    async def _call(reading: Awaitable[ToolOutput]) -> ToolOutput:
        """Await a read, rendering the service's refusal (a workspace outside the root)."""
        try:
            return await reading
        except KeelError as exc:
            raise ToolError(refusal(exc)) from None
