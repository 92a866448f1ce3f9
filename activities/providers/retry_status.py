"""Which HTTP statuses from a model provider or a webhook receiver are worth retrying.

Timeouts, conflicts, too-early and rate limits (408, 409, 425, 429) and every 5xx; any
other 4xx says the request itself is wrong, and sending it again cannot help.
"""

from __future__ import annotations

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


def status_is_retryable(status: int) -> bool:
    """Whether a request answered with `status` may succeed when sent again."""
    return status in RETRYABLE_STATUS or status >= 500
