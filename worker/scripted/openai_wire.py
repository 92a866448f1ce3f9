"""OpenAI's chat completions wire format, as the scripted server speaks it: a turn
rendered as a completion or as stream chunks (content and tool-call arguments split
across chunks, as real providers split them), and the error bodies a provider answers
with (a request over the window, a rate limit with `Retry-After`, a server error).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.responses import JSONResponse

if TYPE_CHECKING:
    from keel.worker.scripted.llm import Turn

__all__ = ["Reply", "context_length_exceeded", "openai_error", "pieces", "scripted_failure"]

_CONTENT_PIECES = 3
_ARGUMENT_PIECES = 2


class Reply:
    """One turn rendered for one request, as a completion or as stream chunks."""

    def __init__(
        self, turn: Turn, index: int, content: str | None, model: str, call_tag: str = ""
    ) -> None:
        self.turn = turn
        self.call_tag = call_tag
        self.index = index
        self.content = content
        self.model = model
        # Deterministic, so a retried request sees the same ids.
        self.id = f"chatcmpl-scripted-{index}"
        self.created = int(time.time())

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.turn.tool_calls else "stop"

    def call_id(self, i: int) -> str:
        return f"call_{self.index}_{i}{self.call_tag}"

    def usage(self) -> dict[str, int]:
        prompt, completion = self.turn.prompt_tokens, self.turn.completion_tokens
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def completion(self) -> dict[str, object]:
        message: dict[str, object] = {"role": "assistant", "content": self.content}
        if self.turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": self.call_id(i),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json()},
                }
                for i, call in enumerate(self.turn.tool_calls)
            ]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self.finish_reason,
                }
            ],
            "usage": self.usage(),
        }

    def chunks(self, include_usage: bool) -> list[dict[str, object]]:
        """The `chat.completion.chunk` objects of the streamed reply, in order."""
        head: dict[str, object] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
        }
        if include_usage:
            head["usage"] = None

        def chunk(delta: dict[str, object], finish_reason: str | None = None) -> dict[str, object]:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            return {**head, "choices": [choice]}

        out = [chunk({"role": "assistant", "content": ""})]
        out += [chunk({"content": piece}) for piece in pieces(self.content or "", _CONTENT_PIECES)]
        for i, call in enumerate(self.turn.tool_calls):
            opening = {
                "index": i,
                "id": self.call_id(i),
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            out.append(chunk({"tool_calls": [opening]}))
            out += [
                chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
                for piece in pieces(call.arguments_json(), _ARGUMENT_PIECES)
            ]
        out.append(chunk({}, self.finish_reason))
        if include_usage:
            out.append({**head, "choices": [], "usage": self.usage()})
        return out

    async def sse(self, include_usage: bool) -> AsyncIterator[str]:
        for item in self.chunks(include_usage):
            if self.turn.stream_pause_s:
                await asyncio.sleep(self.turn.stream_pause_s)
            yield f"data: {json.dumps(item)}\n\n"
        yield "data: [DONE]\n\n"


def context_length_exceeded(window: int, tokens: int) -> JSONResponse:
    """OpenAI's answer to a request larger than the model's context window."""
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages "
        f"resulted in {tokens} tokens. Please reduce the length of the messages."
    )
    error = {
        "message": message,
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    return JSONResponse({"error": error}, status_code=400)


def openai_error(message: str, param: str | None = None, status: int = 400) -> JSONResponse:
    """An OpenAI-style error response."""
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": None}
    return JSONResponse({"error": error}, status_code=status)


# (type, code) of OpenAI error bodies by status; other 4xx are invalid requests.
_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def scripted_failure(status: int, turn: Turn, index: int, attempt: int) -> JSONResponse:
    """The OpenAI-style error a failing turn answers with, on its `attempt`-th request."""
    if status >= 500:
        kind, code = "server_error", None
    else:
        kind, code = _ERROR_KINDS.get(status, ("invalid_request_error", None))
    message = f"Scripted failure {attempt} of {turn.fail_times} for turn {index} (HTTP {status})."
    error = {"message": message, "type": kind, "param": None, "code": code}
    headers = {} if turn.retry_after_s is None else {"Retry-After": seconds(turn.retry_after_s)}
    return JSONResponse({"error": error}, status_code=status, headers=headers)


def seconds(value: float) -> str:
    """Seconds as a header value: `2` rather than `2.0`, `0.5` as is."""
    return str(int(value)) if value.is_integer() else repr(value)


def pieces(text: str, count: int) -> list[str]:
    """Split `text` into at most `count` non-empty consecutive pieces."""
    if not text:
        return []
    size = math.ceil(len(text) / count)
    return [text[i : i + size] for i in range(0, len(text), size)]
