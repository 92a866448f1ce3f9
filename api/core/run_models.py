"""Which models a run tries: the order's `model` (one or a list), else its agent's, else
this Keel's default; a list's every model must have a provider this Keel can reach."""

from __future__ import annotations

from keel.activities.llm.providers import anthropic_messages
from keel.api.core.errors import Invalid
from keel.worker.config.settings import Settings
from keel.workflows.run.agent_spec import AgentSpec
from keel.workflows.run.model_list import split_models

__all__ = ["run_models"]


def run_models(
    given: str | list[str] | None, agent: AgentSpec, settings: Settings
) -> tuple[str, list[str]]:
    """(the model tried first, the fallbacks after it), or `Invalid` saying what to fix."""
    try:
        first, rest = split_models(given)
    except ValueError as exc:
        raise Invalid(str(exc), field="model") from exc
    if first is None:
        if agent.model:
            first, rest = agent.model, list(agent.fallback_models)
        else:
            first, rest = settings.model, []
    for model in rest and [first, *rest]:
        if anthropic_messages.serves(model) and settings.anthropic_api_key is None:
            raise Invalid(
                f"model: {model} is Anthropic's, and this Keel has no ANTHROPIC_API_KEY, so "
                "it could never take a step; set the key, or list models this Keel serves.",
                field="model",
            )
    return first, rest
