"""Which function carries out each built-in tool, reached from its `ToolSpec`.

One implementation per spec, typed by the spec's argument model; `ask_user` has none
(a person answers it). `workflows/` may not import this module (tools do I/O), so the
link runs from the implementation to the spec, and a test checks that every spec that
runs has exactly one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from keel.activities.tools import acting_tools
from keel.activities.tools.acting_tools import Begin
from keel.activities.tools.file_tools import ToolOutput, list_files, read_file, search_code
from keel.activities.tools.finding_tool import report_finding
from keel.activities.tools.sandbox import Sandbox
from keel.activities.tools.workspace import Workspace
from keel.workflows.gate.tool_specs import (
    TOOL_SPECS,
    BashArgs,
    EditFileArgs,
    ListFilesArgs,
    ReadFileArgs,
    ReportFindingArgs,
    SearchCodeArgs,
    ToolArgs,
    ToolSpec,
    WriteFileArgs,
)

__all__ = ["IMPLEMENTATIONS", "ToolContext", "ToolImplementation", "implementation_of"]

ArgsT = TypeVar("ArgsT", bound=ToolArgs)


def _go() -> bool:
    return True


@dataclass(frozen=True)
class ToolContext:
    """What a tool gets besides its arguments."""

    workspace: Workspace
    sandbox: Sandbox
    """Where `bash` runs its command; no default, so none runs unconfined by omission."""
    network: bool = False
    """Whether a `network` rule lets this command reach the network (bash only)."""
    begin: Begin = _go
    """Called right before the first effect; see `acting_tools.Begin`."""


@dataclass(frozen=True)
class ToolImplementation(Generic[ArgsT]):
    """A tool's spec and the function that carries it out, on arguments of its model."""

    spec: ToolSpec
    args_model: type[ArgsT]
    function: Callable[[ToolContext, ArgsT], ToolOutput]

    def run(self, context: ToolContext, arguments: str) -> ToolOutput:
        """Run on the canonical JSON arguments the gate validated."""
        return self.function(context, self.args_model.model_validate_json(arguments))


def implements(
    name: str, args_model: type[ArgsT], function: Callable[[ToolContext, ArgsT], ToolOutput]
) -> ToolImplementation[ArgsT]:
    spec = TOOL_SPECS[name]
    if spec.args_model is not args_model:
        raise TypeError(
            f"{name} takes {spec.args_model.__name__}, not {args_model.__name__}; "
            "implement the spec's own argument model."
        )
    return ToolImplementation(spec=spec, args_model=args_model, function=function)


def _index(*implementations: ToolImplementation[Any]) -> Mapping[str, ToolImplementation[Any]]:
    by_name: dict[str, ToolImplementation[Any]] = {}
    for implementation in implementations:
        name = implementation.spec.name
        if name in by_name:
            raise ValueError(f"Tool {name} has two implementations; keep one.")
        by_name[name] = implementation
    return by_name


IMPLEMENTATIONS: Mapping[str, ToolImplementation[Any]] = _index(
    implements("read_file", ReadFileArgs, lambda c, a: read_file(c.workspace, a)),
    implements("list_files", ListFilesArgs, lambda c, a: list_files(c.workspace, a)),
    implements("search_code", SearchCodeArgs, lambda c, a: search_code(c.workspace, a)),
    implements("report_finding", ReportFindingArgs, lambda c, a: report_finding(c.workspace, a)),
    implements(
        "write_file",
        WriteFileArgs,
        lambda c, a: acting_tools.write_file(c.workspace, a, begin=c.begin),
    ),
    implements(
        "edit_file",
        EditFileArgs,
        lambda c, a: acting_tools.edit_file(c.workspace, a, begin=c.begin),
    ),
    implements(
        "bash",
        BashArgs,
        lambda c, a: acting_tools.bash(
            c.workspace, a, sandbox=c.sandbox, network=c.network, begin=c.begin
        ),
    ),
)


def implementation_of(spec: ToolSpec) -> ToolImplementation[Any] | None:
    """The implementation of a built-in tool; None for one a person or a sub-agent answers."""
    return IMPLEMENTATIONS.get(spec.name)
