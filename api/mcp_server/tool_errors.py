"""Failures as sentences a client (or its model) can read and act on."""

from __future__ import annotations

from pydantic import ValidationError

from keel.api.core.errors import Invalid, KeelError
from keel.api.core.plain_errors import plain_message


def invalid_arguments(tool: str, exc: ValidationError) -> str:
    """Which arguments are wrong and how, without echoing their values."""
    problems = []
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"]) or "arguments"
        if err["type"] == "missing":
            problems.append(f"`{field}` is required")
        else:
            problems.append(f"`{field}`: {plain_message(err, show_input=False).rstrip('.')}")
    return f"Invalid arguments: {'; '.join(problems)}. Correct them and call {tool} again."


def refusal(exc: KeelError) -> str:
    """The service's refusal as a sentence for the client's model: each field at fault
    named before what is wrong with it."""
    if isinstance(exc, Invalid) and exc.problems:
        return "; ".join(f"`{_last(p.get('loc'))}`: {p.get('msg')}" for p in exc.problems)
    field = getattr(exc, "field", None)
    return exc.message if field is None else f"`{field}`: {exc.message}"


def _last(loc: object) -> object:
    return loc[-1] if isinstance(loc, list | tuple) and loc else loc
