"""One mapping of a provider's HTTP answer to a retry: the run's step, a one-shot call,
the Anthropic adapter, a plugin model and webhook delivery all read it from here."""

from __future__ import annotations

from datetime import timedelta

import pytest

from keel.activities.llm.providers.retry_status import error_detail, provider_error, retry_after


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("7", timedelta(seconds=7)),
        ("0.5", timedelta(seconds=0.5)),
        ("9000", timedelta(seconds=300)),  # capped
        ("-3", None),
        ("nan", None),
        ("Wed, 21 Oct 2026 07:28:00 GMT", None),  # an HTTP date is not honoured
        (None, None),
    ],
)
def test_retry_after_reads_seconds_and_caps_them(
    header: str | None, expected: timedelta | None
) -> None:
    headers = {} if header is None else {"retry-after": header}
    assert retry_after(headers) == expected


def test_a_longer_cap_holds_for_webhooks() -> None:
    assert retry_after({"retry-after": "500"}, cap_s=600) == timedelta(seconds=500)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"error": {"message": "too many", "type": "rate_limit_error"}},
            "rate_limit_error: too many",
        ),
        ({"error": {"message": "bad model"}}, "bad model"),
        ({"detail": "odd"}, '{"detail": "odd"}'),
        (None, "the SDK's message"),
        ({"error": {"message": "x" * 1000}}, "x" * 300),
    ],
)
def test_error_detail_takes_the_providers_sentence(body: object, expected: str) -> None:
    assert error_detail(body, "the SDK's message") == expected


@pytest.mark.parametrize("status", [408, 409, 425, 429, 500, 503, 529])
def test_retryable_answers_wait_as_asked(status: int) -> None:
    error = provider_error("Anthropic", status, "busy", delay=timedelta(seconds=2))
    assert error.type == "LlmUnavailable" and not error.non_retryable
    assert error.next_retry_delay == timedelta(seconds=2)
    assert error.message == f"Anthropic answered {status}: busy"


@pytest.mark.parametrize("status", [400, 401, 403, 413, 422])
def test_other_client_errors_are_not_retried(status: int) -> None:
    error = provider_error("LLM provider", status, "no", purpose="the summary")
    assert error.type == "LlmRequestRejected" and error.non_retryable
    assert error.message == f"LLM provider rejected the summary ({status}): no"


def test_an_unknown_model_is_not_retried_and_is_told_apart() -> None:
    # A run with a list of models moves to the next one on it (workflows/run/model_fallback).
    error = provider_error("LLM provider", 404, "model_not_found: no such model")
    assert error.type == "LlmModelUnknown" and error.non_retryable
    assert "does not know the model" in error.message
