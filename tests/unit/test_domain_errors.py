"""The service's errors, rendered once per surface: HTTP status, detail shape, headers,
MCP sentence and A2A error."""

from __future__ import annotations

from a2a.types import (
    InternalError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from keel.api.a2a.errors import a2a_error
from keel.api.core.decisions import InteractionClosed
from keel.api.core.errors import (
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    Unauthenticated,
    Unavailable,
)
from keel.api.http.errors import detail_of, headers_of, status_of
from keel.api.mcp_server.tool_errors import refusal


def test_each_error_has_its_http_status() -> None:
    cases = [
        (Unauthenticated("no token"), 401),
        (Forbidden("no"), 403),
        (NotFound("No run x."), 404),
        (Conflict("taken"), 409),
        (InteractionClosed("Interaction ia-1 is already resolved."), 409),
        (Invalid("bad"), 422),
        (Unavailable("later"), 503),
    ]
    assert [status_of(error) for error, _ in cases] == [code for _, code in cases]


def test_a_named_field_is_rendered_as_fastapi_renders_its_own_422s() -> None:
    invalid = Invalid("Malformed cursor.", field="cursor", where="query")
    assert detail_of(invalid) == [
        {"loc": ["query", "cursor"], "msg": "Malformed cursor.", "type": "value_error"}
    ]
    assert detail_of(Conflict("taken", field="run_id"))[0]["loc"] == ["body", "run_id"]  # type: ignore[index]
    assert detail_of(NotFound("No run x.")) == "No run x."
    assert refusal(invalid) == "`cursor`: Malformed cursor."
    assert refusal(NotFound("No run x.")) == "No run x."


def test_retry_after_and_the_bearer_challenge_are_headers() -> None:
    assert headers_of(Unavailable("later", retry_after_s=5)) == {"Retry-After": "5"}
    assert headers_of(Unavailable("later")) == {}
    assert headers_of(Unauthenticated("no token")) == {"WWW-Authenticate": "Bearer"}
    assert Unavailable("later").retryable and not Conflict("taken").retryable


def test_a2a_gets_the_spec_codes() -> None:
    assert isinstance(a2a_error(NotFound("No run x.")), TaskNotFoundError)
    assert isinstance(a2a_error(InteractionClosed("closed")), UnsupportedOperationError)
    assert isinstance(a2a_error(Conflict("finished"), cancelling=True), TaskNotCancelableError)
    assert isinstance(a2a_error(Unavailable("later")), InternalError)
    named = a2a_error(Invalid("Unknown agent 'x'.", field="agent"))
    assert isinstance(named, InvalidParamsError) and named.message == "agent: Unknown agent 'x'."
    assert isinstance(a2a_error(Forbidden("not yours")), InvalidParamsError)
