"""A provider plugin as the LLM activity's adapter: its reply stored, its errors mapped.

The plugin answers a `ModelReply` or raises; this turns both into what the built-in
adapters give the activity: the assistant message in the chat-completions shape,
usage (estimated when the plugin does not count tokens, so budgets and costs still
hold), a finish reason, and errors as `ApplicationError`s that say whether Temporal
retries (`LlmUnavailable`, with the plugin's retry-after) or not (`LlmRequestRejected`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from typing import Any, Literal

from temporalio.exceptions import ApplicationError

from keel.activities.context.budget import ContextLengthExceeded
from keel.activities.llm.genai_spans import note_response_model
from keel.activities.llm.provider_api import (
    ModelContextTooLong,
    ModelProviderError,
    ModelReply,
    ModelRequest,
    ModelToolCall,
    ProviderRef,
)
from keel.activities.llm.providers.retry_status import retry_delay
from keel.workflows.context.budget import estimate_message, estimate_text, estimate_tools
from keel.workflows.error_types import LLM_REQUEST_REJECTED, LLM_UNAVAILABLE
from keel.workflows.usage.models import Usage


async def complete(
    ref: ProviderRef,
    *,
    model: str,
    run_id: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    tool_choice: str,
    on_text: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], Usage, str]:
    """One call of the plugin's model: (assistant message, usage, finish reason)."""
    choice: Literal["auto", "none"] = "auto" if tool_choice == "auto" and tools else "none"
    function = ref.provider.complete
    request = ModelRequest(
        model=model,
        messages=messages,
        tools=tools if choice == "auto" else [],
        tool_choice=choice,
        run_id=run_id,
        stream=_stream_for(function, on_text),
    )
    try:
        if inspect.iscoroutinefunction(function):
            reply = await function(request)
        else:
            reply = await asyncio.to_thread(function, request)
            if inspect.isawaitable(reply):
                reply = await reply
    except ModelContextTooLong as exc:
        raise ContextLengthExceeded(str(exc), exc.limit, exc.size) from exc
    except ModelProviderError as exc:
        raise _mapped(ref, exc) from exc
    except Exception as exc:  # a plugin's bug or outage: retried like an unreachable endpoint
        raise ApplicationError(
            f"The model provider {ref.label} failed: {type(exc).__name__}: {str(exc)[:300]}",
            type=LLM_UNAVAILABLE,
        ) from exc
    if not isinstance(reply, ModelReply):
        raise ApplicationError(
            f"The model provider {ref.label} answered a {type(reply).__name__}, not a "
            "ModelReply; fix the plugin.",
            type=LLM_REQUEST_REJECTED,
            non_retryable=True,
        )
    try:
        return _message(reply, request)
    except (TypeError, ValueError, OverflowError) as exc:
        # The same reply comes back on every attempt: retrying cannot help.
        raise ApplicationError(
            f"The model provider {ref.label} answered a malformed ModelReply: "
            f"{type(exc).__name__}: {str(exc)[:300]}; fix the plugin.",
            type=LLM_REQUEST_REJECTED,
            non_retryable=True,
        ) from exc


def _stream_for(
    function: Callable[..., Any], on_text: Callable[[str], None] | None
) -> Callable[[str], None]:
    """`on_text` for the plugin: handed to the event loop when the plugin runs in a thread."""
    if on_text is None:
        return lambda _text: None
    if inspect.iscoroutinefunction(function):
        return lambda text: on_text(str(text)) if text else None
    loop = asyncio.get_running_loop()

    def from_thread(text: str) -> None:
        if text:
            loop.call_soon_threadsafe(on_text, str(text))

    return from_thread


def _mapped(ref: ProviderRef, exc: ModelProviderError) -> ApplicationError:
    if exc.retryable:
        return ApplicationError(
            f"The model provider {ref.label} failed: {exc}",
            type=LLM_UNAVAILABLE,
            next_retry_delay=retry_delay(exc.retry_after_s),
        )
    return ApplicationError(
        f"The model provider {ref.label} rejected the request: {exc}",
        type=LLM_REQUEST_REJECTED,
        non_retryable=True,
    )


def _message(reply: ModelReply, request: ModelRequest) -> tuple[dict[str, Any], Usage, str]:
    """The reply as the stored message; TypeError, ValueError or OverflowError when it is
    not well formed."""
    calls: list[dict[str, Any]] = []
    if request.tool_choice == "auto":
        for i, call in enumerate(reply.tool_calls):
            if not isinstance(call, ModelToolCall):
                raise TypeError(f"tool_calls[{i}] is a {type(call).__name__}, not a ModelToolCall")
            arguments = (
                call.arguments
                if isinstance(call.arguments, str)
                else json.dumps(dict(call.arguments), ensure_ascii=False)
            )
            calls.append(
                {
                    "id": call.id or f"call_{i}",
                    "type": "function",
                    "function": {"name": str(call.name), "arguments": arguments or "{}"},
                }
            )
    text = str(reply.text or "")
    prompt = reply.input_tokens
    if prompt is None:
        prompt = sum(estimate_message(m) for m in request.messages) + estimate_tools(request.tools)
    completion = reply.output_tokens
    if completion is None:
        written = text + "".join(c["function"]["arguments"] for c in calls)
        completion = estimate_text(written)
    finish = reply.finish_reason or ("tool_calls" if calls else "stop")
    note_response_model(reply.response_model or request.model)
    usage = Usage(prompt_tokens=max(int(prompt), 0), completion_tokens=max(int(completion), 0))
    return {"content": text, "tool_calls": calls}, usage, finish


async def summarise(
    ref: ProviderRef, model: str, run_id: str, messages: list[dict[str, Any]]
) -> tuple[str, tuple[int, int]]:
    """A compaction summary from the plugin's model: its text and [prompt, completion]."""
    message, usage, _ = await complete(
        ref, model=model, run_id=run_id, messages=messages, tools=[], tool_choice="none"
    )
    return str(message["content"]), (usage.prompt_tokens, usage.completion_tokens)
