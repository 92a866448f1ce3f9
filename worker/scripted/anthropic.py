"""Anthropic's Messages API in front of the scripted model (`POST /v1/messages`).

A Messages request is read as the chat-completions request it stands for (system
first, `tool_use` blocks as tool calls, `tool_result` blocks as tool messages), so a
`Script`'s turns, failures and counters work the same for both APIs; the scripted
reply is then written back as a Messages response, or as its server-sent events
(`message_start`, `content_block_*` with `text_delta` / `input_json_delta`,
`message_delta` with the stop reason and usage, `message_stop`), and an error in
Anthropic's shape (`{"type": "error", "error": {"type": "rate_limit_error", ...}}`),
its `retry-after` header kept.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

# Anthropic's error types by HTTP status.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
_PIECES = 4


def chat_request(body: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions request a Messages request stands for (never streamed)."""
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if isinstance(system, list):
        system = "".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    if system:
        messages.append({"role": "system", "content": system})
    for turn in body.get("messages") or []:
        messages.extend(_chat_messages(turn))
    tools = [
        {
            "type": "function",
            "function": {
                "name": t.get("name"),
                "description": t.get("description", ""),
                "parameters": t.get("input_schema", {}),
            },
        }
        for t in body.get("tools") or []
        if isinstance(t, dict)
    ]
    request: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    if tools:
        request["tools"] = tools
    return request


def _chat_messages(turn: object) -> list[dict[str, Any]]:
    if not isinstance(turn, dict):
        return []
    role, content = turn.get("role"), turn.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    blocks = [b for b in content or [] if isinstance(b, dict)]
    text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    if role == "assistant":
        calls = [
            {
                "id": b.get("id"),
                "type": "function",
                "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input", {}))},
            }
            for b in blocks
            if b.get("type") == "tool_use"
        ]
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = calls
        return [message]
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": _result_text(b)}
        for b in blocks
        if b.get("type") == "tool_result"
    ]
    if text:
        out.append({"role": "user", "content": text})
    return out


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def error_body(status: int, chat_error: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-style error of the scripted server, as Anthropic writes it."""
    error = chat_error.get("error") if isinstance(chat_error.get("error"), dict) else {}
    message = str((error or {}).get("message", "scripted failure"))
    if (error or {}).get("code") == "context_length_exceeded":
        message = f"prompt is too long: {message}"
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def message_body(completion: dict[str, Any]) -> dict[str, Any]:
    """A chat completion of the scripted server as a Messages response."""
    choice = completion["choices"][0]
    reply = choice["message"]
    content: list[dict[str, Any]] = []
    if reply.get("content"):
        content.append({"type": "text", "text": reply["content"]})
    for call in reply.get("tool_calls") or []:
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_{call['id']}",
                "name": call["function"]["name"],
                "input": json.loads(call["function"]["arguments"] or "{}"),
            }
        )
    usage = completion.get("usage") or {}
    return {
        "id": f"msg_{completion['id']}",
        "type": "message",
        "role": "assistant",
        "model": completion.get("model"),
        "content": content,
        "stop_reason": STOP_REASONS.get(choice.get("finish_reason"), "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.get("prompt_tokens", 0),
            "output_tokens": usage.get("completion_tokens", 0),
        },
    }


def sse(message: dict[str, Any]) -> Iterator[str]:
    """The server-sent events that stream `message`, text and arguments in pieces."""
    head = {**message, "content": [], "stop_reason": None}
    head["usage"] = {"input_tokens": message["usage"]["input_tokens"], "output_tokens": 1}
    yield _event("message_start", {"type": "message_start", "message": head})
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in _pieces(json.dumps(block["input"]))
            ]
        yield _event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        for delta in deltas:
            yield _event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield _event("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        },
    )
    yield _event("message_stop", {"type": "message_stop"})


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


def _pieces(text: str) -> list[str]:
    if not text:
        return []
    size = math.ceil(len(text) / _PIECES)
    return [text[i : i + size] for i in range(0, len(text), size)]
