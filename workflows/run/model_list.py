"""An agent's or run's `model`: one name, or a list whose first is tried first and whose
others take a step the one before failed (`model_fallback`).

Checked wherever a model is given (the agent file, the API, the CLI): an empty list, a
blank or malformed name and a name listed twice are refused with a sentence that says
how to write it. Whether each model's provider is configured is the service's check.
"""

from __future__ import annotations

import re

__all__ = ["MAX_MODELS", "split_models"]

MAX_MODELS = 5
"""More fallbacks than this only delay a failure a list cannot fix."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")


def split_models(value: object, field: str = "model") -> tuple[str | None, list[str]]:
    """(first model, fallback models) of a `model` value; ValueError with what to fix."""
    if value is None:
        return None, []
    if isinstance(value, str):
        return value, []
    if not isinstance(value, list | tuple):
        raise ValueError(f"{field} is a model name or a list of them, not {type(value).__name__}.")
    if not value:
        raise ValueError(
            f"{field} is an empty list; name at least one model (the first is tried first)."
        )
    if len(value) > MAX_MODELS:
        raise ValueError(f"{field} lists {len(value)} models; list at most {MAX_MODELS}.")
    names: list[str] = []
    for item in value:
        if not isinstance(item, str) or not _NAME.match(item.strip()):
            raise ValueError(
                f"{field}: {item!r} is not a model name (letters, digits and ._:/@+-)."
            )
        name = item.strip()
        if name in names:
            raise ValueError(
                f"{field} lists {name} twice; name each model once, in the order to try them."
            )
        names.append(name)
    return names[0], names[1:]
