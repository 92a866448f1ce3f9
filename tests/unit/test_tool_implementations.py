"""Every built-in tool that runs has exactly one implementation, typed by its spec's model."""

from __future__ import annotations

from pathlib import Path

import pytest

from keel.activities.tools.implementations import (
    IMPLEMENTATIONS,
    ToolContext,
    implementation_of,
    implements,
)
from keel.activities.tools.sandbox import Sandbox
from keel.activities.tools.workspace import Workspace
from keel.workflows.gate.tool_specs import TOOL_SPECS, ReadFileArgs


def test_every_spec_that_runs_has_exactly_one_implementation() -> None:
    # `ask_user` is answered by a person and `task` by a sub-agent run: neither runs here.
    runs = {name for name, spec in TOOL_SPECS.items() if spec.group not in ("interact", "task")}

    assert set(IMPLEMENTATIONS) == runs
    for name in runs:
        implementation = implementation_of(TOOL_SPECS[name])
        assert implementation is not None and implementation.spec is TOOL_SPECS[name]
        assert implementation.args_model is TOOL_SPECS[name].args_model
    assert implementation_of(TOOL_SPECS["ask_user"]) is None  # a person answers it
    assert implementation_of(TOOL_SPECS["task"]) is None  # a child workflow runs it


def test_an_implementation_must_take_its_specs_argument_model() -> None:
    with pytest.raises(TypeError, match="write_file takes WriteFileArgs"):
        implements("write_file", ReadFileArgs, lambda c, a: None)  # type: ignore[arg-type,return-value]


def test_an_implementation_runs_from_the_canonical_arguments(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    implementation = implementation_of(TOOL_SPECS["read_file"])
    assert implementation is not None

    context = ToolContext(workspace=Workspace(tmp_path), sandbox=Sandbox.configured("bwrap"))
    out = implementation.run(context, '{"path":"a.txt"}')

    assert "hello" in out.text and not out.is_error
