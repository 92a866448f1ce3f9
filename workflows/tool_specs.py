"""The tools an agent may call: their argument models, risk and parallelism.

Pure data, shared by the gate (which validates arguments inside the workflow)
and by the tool activities (which execute them).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Risk = Literal["read", "write", "exec", "external"]


class ToolArgs(BaseModel):
    """Base for tool arguments: unknown keys are an error the model can fix."""

    model_config = ConfigDict(extra="forbid")


class ReadFileArgs(ToolArgs):
    """Arguments of `read_file`."""

    path: str = Field(description="File path relative to the workspace root.")
    start_line: int = Field(default=1, ge=1, description="First line to return (1-based).")
    end_line: int | None = Field(
        default=None, ge=1, description="Last line to return (inclusive); omit for the end."
    )


class ListFilesArgs(ToolArgs):
    """Arguments of `list_files`."""

    pattern: str = Field(default="**/*", description="Glob relative to `path`, e.g. `**/*.py`.")
    path: str = Field(default=".", description="Directory to list, relative to the workspace.")


class SearchCodeArgs(ToolArgs):
    """Arguments of `search_code`."""

    pattern: str = Field(min_length=1, description="Regular expression to search for.")
    path: str = Field(default=".", description="Directory to search, relative to the workspace.")
    glob: str | None = Field(default=None, description="Only search files matching this glob.")
    max_results: int = Field(default=100, ge=1, le=1000, description="Cap on matching lines.")


class ToolSpec(BaseModel):
    """What the gate and the LLM need to know about one tool."""

    name: str
    description: str
    risk: Risk
    read_only: bool
    args_model: type[ToolArgs]

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def json_schema(self) -> dict[str, object]:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return schema


TOOL_SPECS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            name="read_file",
            description=(
                "Read a text file of the workspace, optionally a line range. "
                "Output is capped; ask for a narrower range of a large file."
            ),
            risk="read",
            read_only=True,
            args_model=ReadFileArgs,
        ),
        ToolSpec(
            name="list_files",
            description=(
                "List files of the workspace matching a glob. Skips .git, "
                "node_modules, virtualenvs and caches."
            ),
            risk="read",
            read_only=True,
            args_model=ListFilesArgs,
        ),
        ToolSpec(
            name="search_code",
            description=(
                "Search the workspace's files for a regular expression; returns path:line: text."
            ),
            risk="read",
            read_only=True,
            args_model=SearchCodeArgs,
        ),
    )
}
