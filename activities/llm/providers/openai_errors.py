"""An OpenAI-compatible endpoint's failures as activity errors, for every caller of it.

The run's step and the one-shot calls (a summary, a route, a memory's facts) send the
same requests; a refusal for length becomes `ContextLengthExceeded` (compaction then
shortens the conversation), any other HTTP error goes through `retry_status`, and an
endpoint that cannot be reached is retried.
"""

from __future__ import annotations

import openai
from temporalio.exceptions import ApplicationError

from keel.activities.context.budget import exceeded_limit
from keel.activities.llm.providers.retry_status import error_detail, provider_error, retry_after
from keel.workflows.error_types import LLM_UNAVAILABLE

__all__ = ["status_error", "unreachable"]


def status_error(exc: openai.APIStatusError, purpose: str | None = None) -> Exception:
    """The error to raise for the endpoint's HTTP answer `exc` to `purpose`."""
    refusal = exceeded_limit(exc)
    if refusal is not None:
        return refusal
    return provider_error(
        "LLM provider",
        exc.status_code,
        error_detail(exc.body, str(exc.message)),
        delay=retry_after(exc.response.headers),
        purpose=purpose,
    )


def unreachable(base_url: object, exc: Exception, purpose: str | None = None) -> ApplicationError:
    """The error for an endpoint that did not answer (connection refused, timed out)."""
    what = f" for {purpose}" if purpose else ""
    return ApplicationError(
        f"LLM endpoint unreachable at {base_url}{what}: {exc}", type=LLM_UNAVAILABLE
    )
