"""Failures as sentences a client (or its model) can read and act on."""

from __future__ import annotations

from pydantic import ValidationError

from keel.api.core.errors import KeelError
from keel.api.core.plain_errors import plain_message
from keel.api.http.errors import detail_of


def invalid_arguments(tool: str, exc: ValidationError) -> str:
    """Which arguments are wrong and how, without echoing their values."""
    problems = []
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"]) or "arguments"
        if err["type"] == "missing":
            problems.append(f"`{field}` is required")
        else:
            problems.append(f"`{field}`: {plain_message(err).rstrip('.')}")
    return f"Invalid arguments: {'; '.join(problems)}. Correct them and call {tool} again."


def refusal(exc: KeelError) -> str:
    """The sentence a REST caller would get in `detail`, for the same refusal."""
    detail = detail_of(exc)  # one rendering for both, so the sentences cannot drift apart
    if isinstance(detail, list):
        return "; ".join(
            f"`{item['loc'][-1]}`: {item['msg']}" if isinstance(item, dict) else str(item)
            for item in detail
        )
    return str(detail)
