"""The `tools` of a chat request, built from Keel's tool specs."""

from __future__ import annotations

import functools
from typing import Any

from keel.activities.plugin_api import PluginTool
from keel.workflows.gate.tool_specs import TOOL_SPECS


def lean_schema(schema: dict[str, Any], *, keep_description: bool = False) -> dict[str, Any]:
    """`schema` without what pydantic adds for people and a model does not need: each
    property's `title` (its name, capitalised) and, unless kept, the model's docstring
    (Keel's say "Arguments of `read_file`.", which the tool's description says better).
    Every request carries the schemas: these were a seventh of their tokens."""
    drop = ("title",) if keep_description else ("title", "description")
    lean = {k: v for k, v in schema.items() if k not in drop}
    properties = lean.get("properties")
    if isinstance(properties, dict):
        lean["properties"] = {name: _untitled(prop) for name, prop in properties.items()}
    return lean


def _untitled(prop: object) -> object:
    return {k: v for k, v in prop.items() if k != "title"} if isinstance(prop, dict) else prop


@functools.lru_cache(maxsize=64)
def tool_definitions(names: tuple[str, ...]) -> list[dict[str, Any]]:
    """The `tools` of a request, built once per tool set: JSON schemas are slow to make."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": TOOL_SPECS[name].description,
                "parameters": lean_schema(TOOL_SPECS[name].json_schema()),
            },
        }
        for name in names
    ]


@functools.lru_cache(maxsize=256)
def plugin_tool_definition(tool: PluginTool) -> dict[str, Any]:
    """A plugin tool as a chat request offers it: its own description and JSON schema."""
    # A plugin's docstring is its author's word on the arguments: it stays.
    schema = lean_schema(tool.args_model.model_json_schema(), keep_description=True)
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": schema},
    }
