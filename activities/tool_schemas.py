"""The `tools` of a chat request, built from Keel's tool specs."""

from __future__ import annotations

import functools
from typing import Any

from keel.activities.plugin_api import PluginTool
from keel.workflows.gate.tool_specs import TOOL_SPECS


@functools.lru_cache(maxsize=64)
def tool_definitions(names: tuple[str, ...]) -> list[dict[str, Any]]:
    """The `tools` of a request, built once per tool set: JSON schemas are slow to make."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": TOOL_SPECS[name].description,
                "parameters": TOOL_SPECS[name].json_schema(),
            },
        }
        for name in names
    ]


@functools.lru_cache(maxsize=256)
def plugin_tool_definition(tool: PluginTool) -> dict[str, Any]:
    """A plugin tool as a chat request offers it: its own description and JSON schema."""
    schema = tool.args_model.model_json_schema()
    schema.pop("title", None)
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": schema},
    }
