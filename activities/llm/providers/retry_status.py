"""What an HTTP error from a model provider or a webhook receiver means for a retry.

Timeouts, conflicts, too-early and rate limits (408, 409, 425, 429) and every 5xx are
worth sending again, after the `Retry-After` the answer carried; any other 4xx says the
request itself is wrong, and sending it again cannot help. Every provider adapter maps
its errors through `provider_error`, so a run's step, a one-shot call (a summary, a
route, a memory) and a plugin's model fail the same way for the same answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta

from temporalio.exceptions import ApplicationError

from keel.workflows.error_types import LLM_MODEL_UNKNOWN, LLM_REQUEST_REJECTED, LLM_UNAVAILABLE

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
MAX_RETRY_AFTER_S = 300.0
"""The longest a provider's `Retry-After` holds a retry back; longer asks are capped."""
DETAIL_CHARS = 300


def status_is_retryable(status: int) -> bool:
    """Whether a request answered with `status` may succeed when sent again."""
    return status in RETRYABLE_STATUS or status >= 500


def retry_after(headers: Mapping[str, str], cap_s: float = MAX_RETRY_AFTER_S) -> timedelta | None:
    """The delay a `Retry-After` of seconds asks for, at most `cap_s`; None when there is
    none, or it is negative or not a number (an HTTP date is not honoured)."""
    value = headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return retry_delay(seconds, cap_s)


def retry_delay(seconds: float | None, cap_s: float = MAX_RETRY_AFTER_S) -> timedelta | None:
    """`seconds` as a retry delay, capped at `cap_s`; None for none or a negative one."""
    if seconds is None or seconds != seconds or seconds < 0:  # NaN is not a delay
        return None
    return timedelta(seconds=min(seconds, cap_s))


def error_detail(body: object, message: str) -> str:
    """The sentence a provider's error body gives (its `error.message`, prefixed by the
    error's `type` where it names one), cut to a length fit for a run's record."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and "message" in error:
            kind = error.get("type")
            text = str(error["message"])
            return (f"{kind}: {text}" if isinstance(kind, str) and kind else text)[:DETAIL_CHARS]
        return json.dumps(body)[:DETAIL_CHARS]
    return message[:DETAIL_CHARS]


def provider_error(
    provider: str,
    status: int,
    detail: str,
    *,
    delay: timedelta | None = None,
    purpose: str | None = None,
) -> ApplicationError:
    """The activity error for a provider's HTTP answer: `LlmUnavailable`, retried after
    `delay`, or `LlmModelUnknown` (a 404) or `LlmRequestRejected`, not retried."""
    what = f" to {purpose}" if purpose else ""
    if status_is_retryable(status):
        return ApplicationError(
            f"{provider} answered {status}{what}: {detail}",
            type=LLM_UNAVAILABLE,
            next_retry_delay=delay,
        )
    rejected = purpose or "the request"
    if status == 404:
        # Chat endpoints answer 404 for a model they do not serve (`model_not_found`).
        return ApplicationError(
            f"{provider} does not know the model asked for{what} (404): {detail}",
            type=LLM_MODEL_UNKNOWN,
            non_retryable=True,
        )
    return ApplicationError(
        f"{provider} rejected {rejected} ({status}): {detail}",
        type=LLM_REQUEST_REJECTED,
        non_retryable=True,
    )
