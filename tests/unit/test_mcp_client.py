"""The MCP client's pure parts: which token a URL gets, and what the model reads."""

from __future__ import annotations

import base64

import pytest
from mcp_types import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from pydantic import SecretStr

from keel.activities.tools.mcp_client import MAX_OUTPUT_CHARS, reason, token_for, tool_output

TOKENS = {
    "https://mcp.example.com": SecretStr("site"),
    "https://mcp.example.com/tickets/": SecretStr("tickets"),
    "http://127.0.0.1:8000": SecretStr("local"),
}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://mcp.example.com/mcp", "site"),
        ("https://mcp.example.com", "site"),
        ("https://mcp.example.com/tickets/mcp", "tickets"),  # the longest prefix wins
        ("https://mcp.example.com.evil.net/mcp", None),  # not at a boundary
        ("https://mcp.example.com:8443/mcp", None),  # another port
        ("http://mcp.example.com/mcp", None),  # another scheme
        ("http://127.0.0.1:8000/mcp", "local"),
        ("http://127.0.0.1:80001/mcp", None),
        ("https://mcp.example.com@evil.net/mcp", None),  # the host is evil.net
        ("https://MCP.example.com/mcp", "site"),  # host names are case-free
    ],
)
def test_a_url_gets_the_token_of_its_longest_prefix(url: str, expected: str | None) -> None:
    assert token_for(TOKENS, url) == expected


def test_text_is_joined_and_other_content_described() -> None:
    png = base64.b64encode(b"\x89PNG" + b"\0" * 96).decode()
    result = CallToolResult(
        content=[
            TextContent(type="text", text="first"),
            ImageContent(type="image", data=png, mime_type="image/png"),
            ResourceLink(type="resource_link", uri="https://x.example/t/1", name="T-1"),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="file:///notes.txt", text="a note"),
            ),
            TextContent(type="text", text="last"),
        ]
    )
    output = tool_output("lookup", result)
    assert not output.is_error
    assert output.text == (
        "first\n"
        "[image: image/png, 100 bytes, not shown]\n"
        "[resource link: https://x.example/t/1 (T-1)]\n"
        "[resource file:///notes.txt]\na note\n"
        "last"
    )


def test_an_error_result_is_marked_as_an_error() -> None:
    result = CallToolResult(
        content=[TextContent(type="text", text="no such ticket")], is_error=True
    )
    output = tool_output("lookup", result)
    assert output.is_error
    assert output.text == "Error: the tool lookup reported an error: no such ticket"


def test_structured_content_stands_in_for_missing_text() -> None:
    result = CallToolResult(content=[], structured_content={"open": 3})
    assert tool_output("count", result).text == '{"open": 3}'
    assert tool_output("noop", CallToolResult(content=[])).text == (
        "(the tool returned no content)"
    )


def test_a_huge_output_is_cut() -> None:
    result = CallToolResult(content=[TextContent(type="text", text="x" * (MAX_OUTPUT_CHARS + 5))])
    text = tool_output("dump", result).text
    assert text.endswith("… [5 more characters cut]")
    assert len(text) < MAX_OUTPUT_CHARS + 100


def test_a_failure_reads_as_its_innermost_first_error() -> None:
    group = ExceptionGroup("unhandled errors", [ConnectionError("All connection attempts failed")])
    assert reason(group) == "ConnectionError: All connection attempts failed"
