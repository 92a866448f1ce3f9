"""Reading a chat completion stream: chunks assembled, provider errors made retryable."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from temporalio.exceptions import ApplicationError

from keel.activities.llm import chat_stream
from keel.activities.llm.chat_stream import collect_stream, stream_chunks
from keel.activities.llm.step import _compact


async def lines(*items: str) -> AsyncIterator[str]:
    for item in items:
        yield item


def data(chunk: object) -> str:
    return "data: " + json.dumps(chunk)


async def test_text_and_tool_calls_are_assembled_and_usage_read() -> None:
    seen: list[str] = []
    stream = lines(
        ": keep-alive",
        data({"choices": [{"delta": {"content": "Hel"}}]}),
        "",
        data({"choices": [{"delta": {"content": "lo"}}]}),
        data(
            {
                "choices": [
                    {
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "c1",
                                    "function": {"name": "read_file", "arguments": '{"pa'},
                                }
                            ]
                        }
                    }
                ]
            }
        ),
        data(
            {
                "choices": [
                    {
                        "delta": {
                            "tool_calls": [{"index": 0, "function": {"arguments": 'th": "a"}'}}]
                        },
                        "finish_reason": "tool_calls",
                    }
                ]
            }
        ),
        data({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}),
        "data: [DONE]",
        data({"choices": [{"delta": {"content": "after the end"}}]}),
    )
    message, usage, finish = await collect_stream(stream_chunks(stream), on_text=seen.append)
    assert message["content"] == "Hello" and seen == ["Hel", "lo"]
    assert message["tool_calls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "a"}'},
        }
    ]
    assert (usage.prompt_tokens, usage.completion_tokens, finish) == (7, 3, "tool_calls")


async def test_an_error_event_mid_stream_is_a_retryable_failure() -> None:
    stream = lines(
        data({"choices": [{"delta": {"content": "par"}}]}),
        data({"error": {"message": "overloaded", "type": "server_error"}}),
    )
    with pytest.raises(ApplicationError, match="overloaded") as caught:
        await collect_stream(stream_chunks(stream))
    assert caught.value.type == "LlmUnavailable" and not caught.value.non_retryable


async def test_a_malformed_chunk_is_a_retryable_failure() -> None:
    with pytest.raises(ApplicationError, match="malformed") as caught:
        await collect_stream(stream_chunks(lines("data: {not json")))
    assert caught.value.type == "LlmUnavailable"


@pytest.mark.parametrize(
    ("raw", "digested"),
    [
        ('{"path": "notes.txt", "start_line": 2}', '{"path":"notes.txt","start_line":2}'),
        ('{"pattern": "née\\\\s+x"}', '{"pattern":"née\\\\s+x"}'),
        ('{"path": ', '{"path": '),  # the gate must see what the model wrote
        ("[1, 2]", "[1, 2]"),
        ("", ""),
    ],
    ids=["spaced", "unicode-and-escapes", "broken", "not-an-object", "empty"],
)
def test_digests_carry_compact_arguments_the_gate_reads_alike(raw: str, digested: str) -> None:
    assert _compact(raw) == digested
    if digested.startswith("{") and digested.endswith("}"):
        assert json.loads(digested) == json.loads(raw)


async def test_the_body_is_read_to_its_end_after_done_so_the_connection_is_reused() -> None:
    read: list[str] = []

    async def body() -> AsyncIterator[str]:
        for item in (data({"choices": [{"delta": {"content": "hi"}}]}), "data: [DONE]", "", ""):
            read.append(item)
            yield item

    message, _, _ = await collect_stream(stream_chunks(body()))
    assert message["content"] == "hi"
    assert len(read) == 4  # the blank lines after [DONE] were read too


async def test_a_server_that_keeps_the_body_open_after_done_is_not_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chat_stream, "STREAM_END_WAIT_S", 0.05)

    async def body() -> AsyncIterator[str]:
        yield data({"choices": [{"delta": {"content": "hi"}}]})
        yield "data: [DONE]"
        await asyncio.sleep(60)
        yield ""

    async with asyncio.timeout(5):
        message, _, _ = await collect_stream(stream_chunks(body()))
    assert message["content"] == "hi"
