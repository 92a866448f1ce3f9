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


# What each pattern a request field must match means, in words ("Must be …"); a test
# checks that every pattern the API's schemas declare is here.
PATTERN_WORDS = {
    r"^https?://\S+$": "an http:// or https:// URL without spaces",
    r"^user:[^\s]{1,200}$": "`user:` and a user id without spaces, such as user:alice",
    r"^[0-9a-f]{64}$": "the 64 lowercase hex digits of the proposal's payload_hash",
    r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$": (
        "an id of up to 128 letters, digits and _ . : -, starting with a letter or digit"
    ),
    r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$": (
        "an id of up to 64 letters, digits and _ . -, starting with a letter or digit"
    ),
    r"^[^\x00-\x1f\x7f]+$": "one line of printable text",
    r"^[^\r\n]*$": "one line, without line breaks",
    r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$": "an HTTP auth scheme such as Bearer or Basic",
    r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$": (
        "lowercase letters and digits, starting with a letter, words joined by - or _"
    ),
}

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
    "string_pattern_mismatch": "pattern",
}

# Kinds whose sentence is "Must be …", by what the value must be.
MUST_BE = {
    "int_parsing": "a whole number",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "float_parsing": "a number",
    "float_type": "a number",
    "finite_number": "a finite number",
    "bool_parsing": "true or false",
    "bool_type": "true or false",
    "string_type": "text",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "datetime_parsing": "a date and time, such as 2026-12-01T09:00:00Z",
    "datetime_type": "a date and time, such as 2026-12-01T09:00:00Z",
    "datetime_from_date_parsing": "a date and time, such as 2026-12-01T09:00:00Z",
}
BOUNDS = {
    "greater_than_equal": ("at least", "ge"),
    "less_than_equal": ("at most", "le"),
    "greater_than": ("more than", "gt"),
    "less_than": ("less than", "lt"),
}
# Values a refusal never repeats back, even to the caller who sent them.
SECRET_FIELDS = {"token", "auth_credentials", "credentials", "secret", "password"}
MAX_SHOWN_CHARS = 60


def _count(n: object, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def _given(error: Mapping[str, Any]) -> str:
    """`, not 'ftp://a'`: what the user typed, when it is short, one value and no secret."""
    value = error.get("input")
    loc = error.get("loc") or ()
    if any(str(part) in SECRET_FIELDS for part in loc):
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return ""
    # A number from a query string or a flag arrives as text: shown as typed, unquoted.
    number = str(error.get("type")) in BOUNDS
    shown = repr(value) if isinstance(value, str) and not number else str(value)
    return f", not {shown}" if len(shown) <= MAX_SHOWN_CHARS else ""


def plain_message(error: Mapping[str, Any], *, show_input: bool = True) -> str:
    """One pydantic (or FastAPI) error's message as a sentence without validator jargon,
    naming the value the user gave where it is short (`Must be at most 200, not 500.`);
    `show_input=False` leaves the value out."""
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    message = str(error.get("msg", "Invalid value.")).removeprefix("Value error, ")
    as_given = message[:1].upper() + message[1:]
    given = _given(error) if show_input else ""
    if kind == "missing":
        loc = [str(p) for p in error.get("loc") or ()]
        if loc in (["body"], []):
            return "The request has no body; send a JSON object."
        return "Required; give it a value."
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
    if kind in BOUNDS:
        words, key = BOUNDS[kind]
        bound = ctx.get(key)
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)  # `at most 1`, as the user would write it, not 1.0
        return f"Must be {words} {bound}{given}."
    if kind == "string_pattern_mismatch":
        pattern = str(ctx["pattern"])
        wanted = PATTERN_WORDS.get(pattern, f"text of the form {pattern}")
        return f"Must be {wanted}{given}."
    if kind == "literal_error":
        return f"Must be one of {ctx.get('expected')}{given}."
    if kind in MUST_BE:
        return f"Must be {MUST_BE[kind]}{given}."
    if kind == "string_unicode":
        return "Must be valid Unicode text (it holds a lone surrogate)."
    if kind == "extra_forbidden":
        return "Not a field this request takes."
    if kind == "json_invalid" and "ctx" in error:
        return f"The body is not valid JSON ({ctx.get('error')}); send UTF-8 JSON."
    return as_given


def plain_errors(errors: Any) -> list[dict[str, Any]]:
    """pydantic's error list, each message in plain words (every other key kept)."""
    return [{**e, "msg": plain_message(e)} for e in errors]
