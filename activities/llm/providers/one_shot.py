"""One unstreamed model call for the activities besides the run's own step.

Compaction's summary, the router's classification and memory's extraction each ask a
model one question and read the text of its answer. `OneShotModel` picks the adapter
by model name exactly as the LLM activity does (a provider plugin's claim, then
Anthropic's `claude-…` / `anthropic/…`, then the OpenAI-compatible endpoint) and maps
every provider error the same way: `LlmUnavailable` (retried by Temporal, after the
server's `retry-after` where it sends one) for 408, 409, 425, 429 and 5xx or an
unreachable endpoint, `LlmRequestRejected` (not retried) for any other 4xx, and
`ContextLengthExceeded` when the provider says the request is too long.

Under a provider's configured limits (`KEEL_PROVIDER_LIMITS`) these calls wait their
turn as the run's own steps do, and count against the same limit: a router, a
compaction or an extraction never sends a request the limit has no room for.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import openai
from temporalio.exceptions import ApplicationError

from keel.activities.context.budget import ContextLengthExceeded
from keel.activities.llm.endpoints import endpoint_for
from keel.activities.llm.genai_spans import note_provider
from keel.activities.llm.limits import CallPermit, ProviderLimiter, endpoint_of
from keel.activities.llm.providers import anthropic_messages, openai_errors, plugin_models
from keel.activities.plugin_api import PluginCode
from keel.workflows.context.budget import estimate_message
from keel.workflows.error_types import CONTEXT_TOO_LONG

__all__ = ["OneShotModel", "OneShotReply"]

log = logging.getLogger("keel.llm.limits")


@dataclass(frozen=True)
class OneShotReply:
    """The text a model answered and the tokens the call spent."""

    text: str
    """The answer's text, as the model wrote it."""
    prompt_tokens: int
    """Tokens of the request, as the provider counted them (estimated when it did not)."""
    completion_tokens: int
    """Tokens of the answer."""

    @property
    def tokens(self) -> tuple[int, int]:
        return self.prompt_tokens, self.completion_tokens


class OneShotModel:
    """One question to whichever adapter serves a model name; retries belong to Temporal."""

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        anthropic: anthropic_messages.AnthropicMessages | None = None,
        plugins: PluginCode | None = None,
        limits: ProviderLimiter | None = None,
    ) -> None:
        self._client = client
        self._anthropic = anthropic
        self._plugins = plugins
        self._limits = limits

    async def complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        *,
        purpose: str,
        run_id: str = "",
        response_format: dict[str, Any] | None = None,
        temperature: float | None = None,
        raise_too_long: bool = False,
    ) -> OneShotReply:
        """Ask `model` once. `purpose` names the call in errors ("the routing request").

        `response_format` is sent where the API takes one (OpenAI-compatible); a server
        that refuses it is asked again without, and other adapters get the prompt alone,
        so the caller checks the answer's shape either way. A request the provider
        finds too long fails without a retry, or raises `ContextLengthExceeded` for a
        caller that can shorten it (`raise_too_long`).
        """
        try:
            return await self._within_limits(
                model,
                messages,
                purpose,
                run_id,
                lambda permit: self._complete(
                    model, messages, purpose, run_id, response_format, temperature, permit
                ),
            )
        except ContextLengthExceeded as exc:
            if raise_too_long:
                raise
            raise ApplicationError(
                f"The provider refused {purpose} as too long for the model {model}: {exc}",
                type=CONTEXT_TOO_LONG,
                non_retryable=True,
            ) from exc

    async def _within_limits(
        self,
        model: str,
        messages: list[dict[str, Any]],
        purpose: str,
        run_id: str,
        call: Callable[[CallPermit], Awaitable[OneShotReply]],
    ) -> OneShotReply:
        """`call`, once the provider's limit (if one covers it) has room for it."""
        if self._limits is None:
            return await call(CallPermit())
        base_url, api_key = endpoint_for(model, self._client, self._anthropic, self._plugins)

        async def on_wait(wait_s: float, reason: str) -> None:
            log.info(
                "%s %s: waiting %.2f s for the rate limit of %s (%s)",
                run_id or "-",
                purpose,
                wait_s,
                endpoint_of(base_url or ""),
                reason,
            )

        async with self._limits.call(
            base_url, api_key, lambda: sum(map(estimate_message, messages)), on_wait
        ) as permit:
            reply = await call(permit)
            permit.used(reply.prompt_tokens + reply.completion_tokens)
            return reply

    async def _complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        purpose: str,
        run_id: str,
        response_format: dict[str, Any] | None,
        temperature: float | None,
        permit: CallPermit,
    ) -> OneShotReply:
        claimed = self._plugins.provider_for(model) if self._plugins is not None else None
        if claimed is not None:
            note_provider(claimed.provider.name, plugin=claimed.plugin)
            text, tokens = await plugin_models.summarise(claimed, model, run_id, messages)
            return OneShotReply(text, *tokens)
        if anthropic_messages.serves(model):
            adapter = anthropic_messages.configured(self._anthropic, model)
            note_provider("anthropic")
            text, tokens = await adapter.summarise(model, messages, on_answer=permit.saw)
            return OneShotReply(text, *tokens)
        return await self._openai(model, messages, purpose, response_format, temperature, permit)

    async def _openai(
        self,
        model: str,
        messages: list[dict[str, Any]],
        purpose: str,
        response_format: dict[str, Any] | None,
        temperature: float | None,
        permit: CallPermit,
    ) -> OneShotReply:
        # In `extra_body`, as the LLM activity sends its requests; the same on the wire.
        body: dict[str, Any] = {"messages": messages}
        if temperature is not None:
            body["temperature"] = temperature
        try:
            try:
                request = {**body, "response_format": response_format} if response_format else body
                completion = await self._client.chat.completions.create(
                    model=model, messages=[], extra_body=request
                )
            except openai.BadRequestError as exc:
                if response_format is None or "response_format" not in str(exc):
                    raise
                # A server without structured outputs: asked again with the prompt alone.
                completion = await self._client.chat.completions.create(
                    model=model, messages=[], extra_body=body
                )
        except openai.APIStatusError as exc:
            permit.saw(exc.status_code, exc.response.headers)  # a 429 holds the others back
            raise openai_errors.status_error(exc, purpose) from exc
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise openai_errors.unreachable(self._client.base_url, exc, purpose) from exc
        text = (completion.choices[0].message.content or "") if completion.choices else ""
        usage = completion.usage
        if usage is not None:
            return OneShotReply(text, usage.prompt_tokens, usage.completion_tokens)
        estimate = sum(estimate_message(m) for m in messages)
        return OneShotReply(text, estimate, math.ceil(len(text) / 4))
