"""The tools an agent may call: their argument models, risk, group and subject.

Pure data, shared by the gate (which validates arguments inside the workflow)
and by the tool activities (which execute them).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Risk = Literal["read", "write", "exec", "external"]
PermissionGroup = Literal["read", "edit", "bash", "interact", "mcp", "task", "plugin"]

MAX_WRITE_BYTES = 1_000_000


class ToolArgs(BaseModel):
    """Base for tool arguments: unknown keys and NUL characters are errors the model can fix.

    No path, command argument or pattern can hold a NUL, and no record of the call could
    be stored with one (Postgres text takes none), so it is refused here, for every tool.
    """

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: object) -> object:
        where = _nul_at(data)
        if where is not None:
            raise ValueError(
                f"{where or 'an argument'} contains a NUL character (\\u0000), which no "
                "path, command or text may hold; remove it and call the tool again"
            )
        return data


def _nul_at(value: object, where: str = "") -> str | None:
    """The dotted location of the first NUL in `value`'s strings (keys too), if any."""
    if isinstance(value, str):
        return where if "\0" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{where}.{key}" if where else str(key)
            if "\0" in str(key):
                return inner
            found = _nul_at(item, inner)
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _nul_at(item, f"{where}[{index}]" if where else f"[{index}]")
            if found is not None:
                return found
    return None


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


class WriteFileArgs(ToolArgs):
    """Arguments of `write_file`."""

    path: str = Field(min_length=1, description="File path relative to the workspace root.")
    content: str = Field(max_length=MAX_WRITE_BYTES, description="The whole new content.")


class EditFileArgs(ToolArgs):
    """Arguments of `edit_file`."""

    path: str = Field(min_length=1, description="File path relative to the workspace root.")
    old_string: str = Field(
        min_length=1, description="Exact text to replace; it must occur exactly once."
    )
    new_string: str = Field(max_length=MAX_WRITE_BYTES, description="Replacement text.")


class BashArgs(ToolArgs):
    """Arguments of `bash`: an argument list, run without a shell."""

    command: list[str] = Field(
        min_length=1,
        max_length=200,
        description='Program and arguments, e.g. ["pytest", "-q"]. No shell: no pipes or $().',
    )
    cwd: str = Field(default=".", description="Working directory relative to the workspace.")
    timeout_s: int = Field(default=120, ge=1, le=1800, description="Kill the command after this.")


class AskUserArgs(ToolArgs):
    """Arguments of `ask_user`."""

    question: str = Field(min_length=1, max_length=4000, description="What you need to know.")


class TaskArgs(ToolArgs):
    """Arguments of `task`: which sub-agent runs, and everything it needs to know."""

    agent: str = Field(min_length=1, max_length=64, description="The sub-agent to run.")
    prompt: str = Field(
        min_length=1,
        max_length=20_000,
        description=(
            "The sub-agent's whole task: it sees nothing else of this conversation, so "
            "name the files or directories, the question, and the answer you want back."
        ),
    )


class ReportFindingArgs(ToolArgs):
    """Arguments of `report_finding`: one finding, as a `findings` block holds it."""

    file: str = Field(min_length=1, max_length=1000, description="Path relative to the workspace.")
    line: int | None = Field(
        default=None, ge=1, description="1-based line the finding is at; null for a whole file."
    )
    severity: Literal["high", "medium", "low"] = Field(description="high, medium or low.")
    title: str = Field(min_length=1, max_length=300, description="The problem, in one line.")
    detail: str = Field(default="", max_length=10_000, description="Why, and the fix.")


class McpToolArgs(ToolArgs):
    """Arguments of a tool from an MCP server: any JSON object.

    The server's own schema is checked by the activity that calls it, which tells the
    model what is wrong."""

    model_config = ConfigDict(extra="allow")


class ToolSpec(BaseModel):
    """What the gate and the LLM need to know about one tool."""

    name: str
    description: str
    risk: Risk
    group: PermissionGroup
    read_only: bool
    quick_write: bool = False
    """A write that finishes in milliseconds: it runs as a local activity, like a read.

    Safe because an acting call is claimed in Postgres before it runs and its output
    stored after, so a call repeated after a crash is answered, not run again."""
    args_model: type[ToolArgs]
    subject_of: Callable[[ToolArgs], str]
    permission: str = ""
    """An MCP tool's permission name, `mcp:<server>:<tool>`, or a plugin tool's,
    `plugin:<plugin>:<tool>`; rules match it as a glob."""
    run_limit_of: Callable[[ToolArgs], int] | None = None
    """Seconds a call may run, by its arguments (a command's own `timeout_s`); None: the
    tools' default. The activity's timeout follows it, so a long command is not cut off."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def json_schema(self) -> dict[str, object]:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return schema

    def subject(self, args: ToolArgs) -> str:
        """What permission patterns match against: a path or a command line."""
        return self.subject_of(args)

    def run_limit_s(self, args: ToolArgs) -> int | None:
        return self.run_limit_of(args) if self.run_limit_of is not None else None


def _path(args: ToolArgs) -> str:
    return str(getattr(args, "path", "."))


def _timeout(args: ToolArgs) -> int:
    assert isinstance(args, BashArgs)
    return args.timeout_s


def _command_line(args: ToolArgs) -> str:
    assert isinstance(args, BashArgs)
    return shlex.join(args.command)


def _finding_file(args: ToolArgs) -> str:
    assert isinstance(args, ReportFindingArgs)
    return args.file


def _question(args: ToolArgs) -> str:
    assert isinstance(args, AskUserArgs)
    return args.question


def _agent(args: ToolArgs) -> str:
    assert isinstance(args, TaskArgs)
    return args.agent


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
            group="read",
            read_only=True,
            args_model=ReadFileArgs,
            subject_of=_path,
        ),
        ToolSpec(
            name="list_files",
            description=(
                "List files of the workspace matching a glob. Skips .git, "
                "node_modules, virtualenvs and caches."
            ),
            risk="read",
            group="read",
            read_only=True,
            args_model=ListFilesArgs,
            subject_of=_path,
        ),
        ToolSpec(
            name="search_code",
            description=(
                "Search the workspace's files for a regular expression; returns path:line: text."
            ),
            risk="read",
            group="read",
            read_only=True,
            args_model=SearchCodeArgs,
            subject_of=_path,
        ),
        ToolSpec(
            name="write_file",
            description="Create or overwrite a file of the workspace with the given content.",
            risk="write",
            group="edit",
            read_only=False,
            quick_write=True,
            args_model=WriteFileArgs,
            subject_of=_path,
        ),
        ToolSpec(
            name="edit_file",
            description=(
                "Replace one exact, unique occurrence of old_string with new_string in a file. "
                "Read the file first; include enough context to make old_string unique."
            ),
            risk="write",
            group="edit",
            read_only=False,
            quick_write=True,
            args_model=EditFileArgs,
            subject_of=_path,
        ),
        ToolSpec(
            name="bash",
            description=(
                "Run a program with arguments inside the workspace, without a shell, "
                "and return its exit code and output (capped)."
            ),
            risk="exec",
            group="bash",
            read_only=False,
            args_model=BashArgs,
            subject_of=_command_line,
            run_limit_of=_timeout,
        ),
        ToolSpec(
            name="report_finding",
            description=(
                "Record one finding as soon as you are sure of it: file, line, severity, "
                "title and detail. Keel keeps it and puts it in the final report whatever "
                "happens to this conversation, so you need not carry it forward yourself."
            ),
            risk="read",
            group="read",
            read_only=True,
            args_model=ReportFindingArgs,
            subject_of=_finding_file,
        ),
        ToolSpec(
            name="ask_user",
            description="Ask the user a question and wait for the answer.",
            risk="read",
            group="interact",
            read_only=False,
            args_model=AskUserArgs,
            subject_of=_question,
        ),
        ToolSpec(
            name="task",
            description=(
                "Run a sub-agent on a part of the work and get its final answer (its report) "
                "back. It starts fresh: it sees only your prompt, not this conversation. "
                "Several task calls in one reply run in parallel. The sub-agents you may "
                "call are listed in your instructions."
            ),
            risk="read",
            group="task",
            read_only=False,
            args_model=TaskArgs,
            subject_of=_agent,
        ),
    )
}
