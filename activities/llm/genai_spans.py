"""What a model call tells its `chat` span, from inside the call.

The worker opens the span around the activity (`keel.worker.observability.genai_tracing`); what only
the call itself learns, the provider's model name, why it stopped, and (when the
operator asks for them) the messages, is put on the current span here. With
tracing off the current span is OpenTelemetry's no-op one and nothing is done.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace

__all__ = [
    "CAPTURE_CONTENT",
    "note_finish",
    "note_messages",
    "note_provider",
    "note_response_model",
]

CAPTURE_CONTENT: ContextVar[bool] = ContextVar("keel_genai_capture_content", default=False)
"""Set by the worker when `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is on."""


def note_response_model(model: str) -> None:
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute("gen_ai.response.model", model)


def note_provider(name: str, plugin: str | None = None) -> None:
    """The adapter that serves the call, when it is not the OpenAI-compatible default."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute("gen_ai.provider.name", name)
        if plugin is not None:
            span.set_attribute("keel.plugin", plugin)


def note_finish(finish_reason: str) -> None:
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])


def note_messages(sent: list[dict[str, Any]], answer: dict[str, Any]) -> None:
    """The conversation sent and the answer, only when the operator asked for contents."""
    if not CAPTURE_CONTENT.get():
        return
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute("gen_ai.input.messages", json.dumps(sent, default=str))
        span.set_attribute(
            "gen_ai.output.messages", json.dumps([{"role": "assistant", **answer}], default=str)
        )
