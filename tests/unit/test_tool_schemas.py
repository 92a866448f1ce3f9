"""The `tools` a chat request offers: Keel's schemas, without pydantic's decoration."""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

from keel.activities.tool_schemas import lean_schema, tool_definitions
from keel.workflows.gate.tool_specs import TOOL_SPECS


def test_keel_tools_are_offered_without_titles_or_docstrings() -> None:
    offered = {t["function"]["name"]: t["function"] for t in tool_definitions(tuple(TOOL_SPECS))}
    for name, function in offered.items():
        schema = function["parameters"]
        assert "description" not in schema, name
        assert all("title" not in prop for prop in schema["properties"].values()), name
        # What the model needs stays: types, defaults, bounds, what each argument is.
        assert schema["properties"] and schema["type"] == "object", name
    finding = offered["report_finding"]["parameters"]
    # A property *named* title is an argument, not decoration.
    assert finding["properties"]["title"]["maxLength"] == 300
    assert finding["required"] == ["file", "severity", "title"]
    read = offered["read_file"]["parameters"]["properties"]
    assert read["start_line"] == {
        "default": 1,
        "description": "First line to return (1-based).",
        "minimum": 1,
        "type": "integer",
    }


def test_the_schemas_are_a_seventh_smaller() -> None:
    names = ("list_files", "read_file", "search_code", "report_finding")
    full = [
        {
            "type": "function",
            "function": {
                "name": n,
                "description": TOOL_SPECS[n].description,
                "parameters": TOOL_SPECS[n].json_schema(),
            },
        }
        for n in names
    ]
    lean = tool_definitions(names)
    assert len(json.dumps(lean)) < 0.87 * len(json.dumps(full))


def test_a_plugins_docstring_stays_when_asked() -> None:
    class Note(BaseModel):
        """Text appended to the ticket, as its author wrote it."""

        text: str = Field(description="What to append.")

    schema = lean_schema(Note.model_json_schema(), keep_description=True)
    assert schema["description"] == "Text appended to the ticket, as its author wrote it."
    assert schema["properties"]["text"] == {"description": "What to append.", "type": "string"}
    assert "title" not in schema
