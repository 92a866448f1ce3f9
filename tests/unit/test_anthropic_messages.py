"""The Messages adapter's translation of Keel's stored conversation, and model routing."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError

from keel.activities.llm.providers.anthropic_messages import (
    configured,
    serves,
    to_messages,
    to_tools,
    wire_model,
)
from keel.worker.scripted import anthropic as scripted_anthropic


def test_a_conversation_becomes_alternating_turns_with_tool_blocks() -> None:
    system, turns = to_messages(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Read it."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c1", "function": {"name": "read_file", "arguments": '{"path":"a"}'}},
                    {"id": "c2", "function": {"name": "read_file", "arguments": "not json"}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "A"},
            {"role": "tool", "tool_call_id": "c2", "content": ""},
            {"role": "user", "content": "Now answer."},
        ]
    )
    assert system == "Be brief."
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[1]["content"] == [
        {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "a"}},
        {"type": "tool_use", "id": "c2", "name": "read_file", "input": {"arguments": "not json"}},
    ]
    # Both results and the nudge share one user turn, as the API requires.
    assert [b["type"] for b in turns[2]["content"]] == ["tool_result", "tool_result", "text"]
    assert turns[2]["content"][1]["content"] == "(no output)"


def test_tools_and_models() -> None:
    [tool] = to_tools(
        [{"type": "function", "function": {"name": "t", "description": "d", "parameters": {}}}]
    )
    assert tool == {"name": "t", "description": "d", "input_schema": {"type": "object"}}
    assert serves("claude-sonnet-4-5") and serves("anthropic/my-proxy-model")
    assert not serves("gpt-4.1-mini") and wire_model("anthropic/x") == "x"


def test_the_scripted_server_reads_a_messages_request_back_as_chat() -> None:
    _, turns = to_messages(
        [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": "ok",
                "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "out"},
        ]
    )
    chat = scripted_anthropic.chat_request({"model": "m", "system": "s", "messages": turns})
    assert [m["role"] for m in chat["messages"]] == ["system", "user", "assistant", "tool"]
    assert chat["messages"][2]["tool_calls"][0]["function"]["name"] == "f"
    assert chat["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "out"}


def test_a_claude_model_without_a_key_is_refused_with_what_to_set() -> None:
    with pytest.raises(ApplicationError, match="no ANTHROPIC_API_KEY; set it") as refused:
        configured(None, "claude-sonnet-4-5")
    assert refused.value.non_retryable and refused.value.type == "LlmRequestRejected"
