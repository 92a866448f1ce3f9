"""Validation problems in plain words, on every surface.

pydantic says "String should have at least 1 character"; people read "Must not be
empty." Each surface renders a request's problems with the field the user typed (a
flag in the CLI, an argument in MCP, the body field over REST); the words come from
here, so a blank task reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_core import PydanticCustomError

BLANK_TASK = "The task is empty or only spaces; say what the agent should do."


def task_text(value: object) -> object:
    """Refuse a task with no text in it, before its length is checked, with a sentence."""
    if isinstance(value, str) and not value.strip():
        raise PydanticCustomError("blank_task", BLANK_TASK)
    return value


# The context value each kind's sentence needs.
NEEDS_CTX = {
    "string_too_short": "min_length",
    "string_too_long": "max_length",
    "too_short": "min_length",
    "too_long": "max_length",
    "greater_than_equal": "ge",
    "less_than_equal": "le",
    "greater_than": "gt",
    "less_than": "lt",
    "literal_error": "expected",
}


def _count(n: object, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def plain_message(error: Mapping[str, Any]) -> str:
    """One pydantic (or FastAPI) error's message as a sentence without validator jargon."""
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    message = str(error.get("msg", "Invalid value.")).removeprefix("Value error, ")
    as_given = message[:1].upper() + message[1:]
    if kind == "missing":
        return "Required."
    if kind in NEEDS_CTX and NEEDS_CTX[kind] not in ctx:
        return as_given  # already in plain words (a surface rendered it once)
    if kind == "string_too_short":
        least = ctx["min_length"]
        return (
            "Must not be empty." if least == 1 else f"Needs at least {_count(least, 'character')}."
        )
    if kind == "string_too_long":
        return f"Too long: at most {_count(ctx.get('max_length'), 'character')}."
    if kind in ("too_short", "too_long"):
        unit = "character" if isinstance(error.get("input"), str) else "item"
        if kind == "too_long":
            return f"Too long: at most {_count(ctx['max_length'], unit)}."
        return f"Needs at least {_count(ctx['min_length'], unit)}."
    bounds = {
        "greater_than_equal": ("at least", "ge"),
        "less_than_equal": ("at most", "le"),
        "greater_than": ("more than", "gt"),
        "less_than": ("less than", "lt"),
    }
    if kind in bounds:
        words, key = bounds[kind]
        return f"Must be {words} {ctx.get(key)}."
    if kind == "literal_error":
        return f"Must be one of {ctx.get('expected')}."
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "Must be a whole number."
    if kind in ("bool_parsing", "bool_type"):
        return "Must be true or false."
    if kind == "string_type":
        return "Must be text."
    if kind == "string_unicode":
        return "Must be valid Unicode text (it holds a lone surrogate)."
    if kind == "extra_forbidden":
        return "Not a field this request takes."
    return as_given


def plain_errors(errors: Any) -> list[dict[str, Any]]:
    """pydantic's error list, each message in plain words (every other key kept)."""
    return [{**e, "msg": plain_message(e)} for e in errors]
