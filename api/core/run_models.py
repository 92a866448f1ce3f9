"""Which models a run tries: the order's `model` (one or a list), else its agent's, else
this Keel's default; a list's every model must have a provider this Keel can reach."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, PlainValidator, TypeAdapter, WithJsonSchema

from keel.activities.llm.providers import anthropic_messages
from keel.api.core.errors import Invalid
from keel.api.core.schemas.common import StoredText
from keel.worker.config.settings import Settings
from keel.workflows.run.agent_spec import AgentSpec
from keel.workflows.run.model_list import MAX_MODELS, split_models

__all__ = ["ModelChoice", "run_models"]

MODEL_NAME_CHARS = 200
_ONE = TypeAdapter(Annotated[StoredText, Field(max_length=MODEL_NAME_CHARS)])
_LIST = TypeAdapter(list[Annotated[StoredText, Field(max_length=MODEL_NAME_CHARS)]])


def _one_or_list(value: object) -> str | list[str]:
    # A name is checked as a name alone: a bad one gets one error, not one a shape.
    return _LIST.validate_python(value) if isinstance(value, list) else _ONE.validate_python(value)


ModelChoice = Annotated[
    str | list[str],
    PlainValidator(_one_or_list),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "maxLength": MODEL_NAME_CHARS},
                {
                    "type": "array",
                    "items": {"type": "string", "maxLength": MODEL_NAME_CHARS},
                    "minItems": 1,
                    "maxItems": MAX_MODELS,
                },
            ]
        }
    ),
]
"""A model name, or a list of them tried in order, as a request gives it."""


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
