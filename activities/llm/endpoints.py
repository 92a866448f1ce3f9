"""Where a model's calls go, and with which key: what a provider's rate limit is kept by."""

from __future__ import annotations

from typing import TYPE_CHECKING

import openai

from keel.activities.llm.providers import anthropic_messages

if TYPE_CHECKING:  # names only: the one-shot adapter imports this from its package
    from keel.activities.llm.providers.anthropic_messages import AnthropicMessages
    from keel.activities.plugin_api import PluginCode

__all__ = ["endpoint_for"]


def endpoint_for(
    model: str,
    client: openai.AsyncOpenAI,
    anthropic: AnthropicMessages | None,
    plugins: PluginCode | None,
) -> tuple[str | None, str | None]:
    """(base URL, key) of the adapter that serves `model`; (None, None) for a plugin's
    model, whose endpoint only the plugin knows, or an Anthropic model with no adapter."""
    if plugins is not None and plugins.provider_for(model) is not None:
        return None, None
    if anthropic_messages.serves(model):
        return anthropic.endpoint if anthropic is not None else (None, None)
    return str(client.base_url), client.api_key
