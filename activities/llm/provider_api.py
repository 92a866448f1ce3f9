"""What a provider plugin's code is given and must give back: one model call.

A provider is a model adapter chosen by model name: it claims names (`echo-1`) or
prefixes (`acme/*`), and the LLM activity hands it every call of a model it claims,
in the chat-completions shape the rest of Keel keeps. It answers with a `ModelReply`,
or raises `ModelProviderError` saying whether a retry can help; Temporal retries, the
activity stores the reply, counts its usage and cost and traces it like a built-in's.

Plugin authors import these from `worker.plugins`; they live here because the
activities that call plugin code may not import `worker/`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ModelContextTooLong",
    "ModelProviderError",
    "ModelReply",
    "ModelRequest",
    "ModelToolCall",
    "PluginProvider",
    "ProviderRef",
]


def _drop(_text: str) -> None:
    return None


@dataclass(frozen=True)
class ModelRequest:
    """One model call, as the provider gets it."""

    model: str
    """The model name the agent or run asked for, as written (a name the provider claims)."""
    messages: list[dict[str, Any]]
    """The conversation in the chat-completions shape: `role` (`system`, `user`,
    `assistant`, `tool`), `content`, an assistant's `tool_calls`, a tool's `tool_call_id`."""
    tools: list[dict[str, Any]]
    """Chat-completions tool definitions: `{"type": "function", "function": {name,
    description, parameters}}`; empty when the call may not use tools."""
    tool_choice: Literal["auto", "none"]
    """`none`: answer in text (tool calls in the reply are dropped)."""
    run_id: str
    stream: Callable[[str], None] = _drop
    """Call with each piece of text as it is produced: listeners see it live. Optional; the
    reply's `text` is what is stored. Safe to call from a plain (threaded) function."""


@dataclass(frozen=True)
class ModelToolCall:
    """A tool the model asks for."""

    name: str
    arguments: Mapping[str, Any] | str
    """An object, or its JSON text."""
    id: str = ""
    """The call's id; Keel numbers calls without one."""


@dataclass(frozen=True)
class ModelReply:
    """What the model answered."""

    text: str = ""
    tool_calls: Sequence[ModelToolCall] = ()
    input_tokens: int | None = None
    """Tokens of the request as the model counted them; None: Keel estimates them."""
    output_tokens: int | None = None
    """Tokens of the answer; None: Keel estimates them."""
    finish_reason: str | None = None
    """Why it stopped (`stop`, `tool_calls`, `length`); None: from whether it called tools."""
    response_model: str | None = None
    """The model that answered, if the provider knows a more exact name."""


class ModelProviderError(Exception):
    """The model call failed; `retryable` says whether trying again can help.

    Retryable: an overloaded or unreachable endpoint, a rate limit (with the wait the
    server asked for in `retry_after_s`). Not retryable: a request the model will refuse
    every time (bad credentials, an unknown model, a malformed request)."""

    def __init__(self, message: str, *, retryable: bool, retry_after_s: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after_s = retry_after_s


class ModelContextTooLong(ModelProviderError):
    """The request is longer than the model's window: Keel compacts and asks again."""

    def __init__(self, message: str, *, limit: int | None = None, size: int | None = None):
        super().__init__(message, retryable=False)
        self.limit = limit
        self.size = size


@dataclass(frozen=True)
class PluginProvider:
    """A model adapter a plugin provides, for the model names it claims.

    `complete(request) -> ModelReply` may be plain (it runs in a thread) or `async`.
    """

    name: str
    """`^[a-z][a-z0-9_-]{0,39}$`; traces name it as the call's `gen_ai.provider.name`."""
    models: Sequence[str]
    """Names it serves: exact (`echo-1`) or a prefix ending in `*` (`acme/*`). A name a
    built-in adapter or another plugin claims is refused."""
    complete: Callable[[ModelRequest], ModelReply | Awaitable[ModelReply]]
    description: str = ""


@dataclass(frozen=True)
class ProviderRef:
    """A loaded provider and the plugin it came from."""

    plugin: str
    provider: PluginProvider

    @property
    def label(self) -> str:
        return f"{self.plugin}/{self.provider.name}"
