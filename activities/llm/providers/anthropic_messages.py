"""Anthropic's Messages API as a model provider, through the `anthropic` client.

Keel keeps conversations in the chat-completions shape (that is what the store, the
context budget and the OpenAI adapter read); this adapter translates a request into
a Messages request (system apart, tool calls as `tool_use` blocks, tool outputs as
`tool_result` blocks in user turns, same-role turns merged), streams the reply, and
hands back the assistant message in the shape the rest of Keel stores. Retries belong
to Temporal, so the client makes one attempt; 408, 409, 429, 5xx and 529 (overloaded)
are retried with the server's `retry-after`, other 4xx fail the call at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from temporalio.exceptions import ApplicationError

from keel.activities.context.budget import ContextLengthExceeded
from keel.activities.llm.providers.retry_status import error_detail, provider_error, retry_after
from keel.workflows.error_types import LLM_REQUEST_REJECTED, LLM_UNAVAILABLE
from keel.workflows.usage.models import Usage

if TYPE_CHECKING:
    # Imported where a client exists: the package costs a worker about 40 MB, which
    # one that serves no Anthropic model should not pay.
    import anthropic

# Anthropic says a request is too long in the message of a 400 (or a 413 for the bytes).
TOO_LONG = ("prompt is too long", "request_too_large", "too many total text bytes")
FINISH_REASONS = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
PREFIX = "anthropic/"


def serves(model: str) -> bool:
    """Whether a model name is Anthropic's: `claude-…`, or any name as `anthropic/NAME`."""
    return model.startswith(("claude-", PREFIX))


def configured(adapter: AnthropicMessages | None, model: str) -> AnthropicMessages:
    """The worker's adapter for an Anthropic `model`; without one, a refusal that says
    how to give the worker one."""
    if adapter is None:
        raise ApplicationError(
            f"The model {model} is served by Anthropic, and this worker has no "
            "ANTHROPIC_API_KEY; set it (and ANTHROPIC_BASE_URL for another endpoint).",
            type=LLM_REQUEST_REJECTED,
            non_retryable=True,
        )
    return adapter


def wire_model(model: str) -> str:
    return model.removeprefix(PREFIX)


def to_messages(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(system, messages) of a Messages request from chat-completion messages."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            system.append(_text(message.get("content")))
            continue
        if role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id", ""),
                "content": _text(message.get("content")) or "(no output)",
            }
            _append(turns, "user", [block])
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            text = _text(message.get("content"))
            if text:
                blocks.append({"type": "text", "text": text})
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id", ""),
                        "name": function.get("name", ""),
                        "input": _input(function.get("arguments")),
                    }
                )
            _append(turns, "assistant", blocks or [{"type": "text", "text": "(no reply)"}])
        else:
            _append(turns, "user", [{"type": "text", "text": _text(message.get("content"))}])
    return "\n\n".join(system), turns


def to_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completion tool definitions as Messages tools."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        function = tool.get("function", {})
        out.append(
            {
                "name": function.get("name", ""),
                "description": function.get("description", ""),
                "input_schema": function.get("parameters") or {"type": "object"},
            }
        )
    return out


def _append(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Messages alternate user and assistant: a turn of the same role joins the last one."""
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": blocks})


def _input(arguments: object) -> dict[str, Any]:
    """A stored call's arguments as a `tool_use` input (an object, as the API requires)."""
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except ValueError:
        return {"arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class AnthropicMessages:
    """Streams one Messages call and answers in the shape Keel stores."""

    def __init__(self, client: anthropic.AsyncAnthropic, max_tokens: int) -> None:
        self._client = client
        self._max_tokens = max_tokens

    async def complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        tool_choice: str,
        on_text: Callable[[str], None] | None = None,
        on_answer: Callable[[int, Mapping[str, str]], None] | None = None,
    ) -> tuple[dict[str, Any], Usage, str]:
        """One streamed call; `on_answer` sees the status and headers (rate limits)."""
        system, turns = to_messages(messages)
        request: dict[str, Any] = {
            "model": wire_model(model),
            "max_tokens": self._max_tokens,
            "messages": turns,
            "stream": True,
        }
        if system:
            request["system"] = system
        if tools:
            request["tools"] = to_tools(tools)
            request["tool_choice"] = {"type": "auto" if tool_choice == "auto" else "none"}
        import anthropic  # loaded with the client this adapter was given

        try:
            stream = await self._client.messages.create(**request)
            if on_answer is not None:
                on_answer(stream.response.status_code, stream.response.headers)
            return await _collect(stream, on_text)
        except anthropic.APIStatusError as exc:
            if on_answer is not None:
                on_answer(exc.status_code, exc.response.headers)
            raise _status_error(exc) from exc
        except (anthropic.APIConnectionError, anthropic.APITimeoutError) as exc:
            raise ApplicationError(
                f"Anthropic endpoint unreachable at {self._client.base_url}: {exc}",
                type=LLM_UNAVAILABLE,
            ) from exc

    @property
    def endpoint(self) -> tuple[str, str | None]:
        """The base URL and key calls go to, for the endpoint's rate limit."""
        return str(self._client.base_url), self._client.api_key

    async def close(self) -> None:
        await self._client.close()

    async def summarise(
        self,
        model: str,
        messages: list[dict[str, Any]],
        on_answer: Callable[[int, Mapping[str, str]], None] | None = None,
    ) -> tuple[str, tuple[int, int]]:
        """One call without tools, for compaction, routing and memory: the text and
        [prompt, completion] tokens; `on_answer` as for `complete`."""
        message, usage, _ = await self.complete(model, messages, [], "none", on_answer=on_answer)
        return str(message["content"]), (usage.prompt_tokens, usage.completion_tokens)


async def _collect(
    stream: Any, on_text: Callable[[str], None] | None
) -> tuple[dict[str, Any], Usage, str]:
    """Assemble the stream's events into one assistant message."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    prompt = completion = 0
    finish = "stop"
    async for event in stream:
        kind = event.type
        if kind == "message_start":
            usage = event.message.usage
            prompt = (
                usage.input_tokens
                + (getattr(usage, "cache_read_input_tokens", None) or 0)
                + (getattr(usage, "cache_creation_input_tokens", None) or 0)
            )
        elif kind == "content_block_start" and event.content_block.type == "tool_use":
            block = event.content_block
            calls[event.index] = {
                "id": block.id,
                "type": "function",
                "function": {"name": block.name, "arguments": ""},
            }
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                text.append(delta.text)
                if on_text is not None:
                    on_text(delta.text)
            elif delta.type == "input_json_delta" and event.index in calls:
                calls[event.index]["function"]["arguments"] += delta.partial_json
        elif kind == "message_delta":
            completion = event.usage.output_tokens or completion
            if event.delta.stop_reason:
                finish = FINISH_REASONS.get(event.delta.stop_reason, event.delta.stop_reason)
    ordered = [calls[i] for i in sorted(calls)]
    for call in ordered:
        call["function"]["arguments"] = call["function"]["arguments"] or "{}"
    message = {"content": "".join(text), "tool_calls": ordered}
    return message, Usage(prompt_tokens=prompt, completion_tokens=completion), finish


def _status_error(exc: anthropic.APIStatusError) -> Exception:
    detail = error_detail(exc.body, str(exc.message))
    if exc.status_code in (400, 413) and any(marker in detail for marker in TOO_LONG):
        return ContextLengthExceeded(detail, None, None)
    return provider_error(
        "Anthropic", exc.status_code, detail, delay=retry_after(exc.response.headers)
    )
