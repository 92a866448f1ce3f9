"""What a provider's answer says about its limits: how long every caller must wait.

A 429's `retry-after` (seconds, or `retry-after-ms`) blocks the endpoint for that long;
on any answer, a remaining count of 0 (`x-ratelimit-remaining-requests` / `-tokens`,
OpenAI's; `anthropic-ratelimit-requests-remaining` / `-tokens-remaining`, Anthropic's)
blocks it until the matching reset (`x-ratelimit-reset-requests: 1.5s`, `6m0s`, `20ms`;
Anthropic's an RFC 3339 time). The wait goes to the shared state, so every worker waits.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime

__all__ = ["MAX_BLOCK_S", "blocked_for"]

MAX_BLOCK_S = 300.0
"""The longest one answer can hold an endpoint back; longer asks are capped."""
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
# (remaining, reset) header pairs, OpenAI's and Anthropic's.
_PAIRS = (
    ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
    ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"),
    ("anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"),
)


def blocked_for(status: int, headers: Mapping[str, str], now: datetime | None = None) -> float:
    """Seconds every call to this endpoint should wait after this answer; 0 for none."""
    waits = [0.0]
    if status == 429:
        waits.append(_retry_after(headers))
    for remaining, reset in _PAIRS:
        if _number(headers.get(remaining)) == 0:
            waits.append(_reset(headers.get(reset), now))
    return min(max(waits), MAX_BLOCK_S)


def _retry_after(headers: Mapping[str, str]) -> float:
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None and millis >= 0:
        return millis / 1000
    seconds = _number(headers.get("retry-after"))
    return seconds if seconds is not None and seconds >= 0 else 0.0


def _reset(value: str | None, now: datetime | None) -> float:
    """A reset header's wait: a number of seconds, a Go duration, or an RFC 3339 time."""
    if not value:
        return 0.0
    plain = _number(value)
    if plain is not None:
        return max(plain, 0.0)
    found = _DURATION.findall(value)
    if found and "".join(n + u for n, u in found) == value.strip():
        return sum(float(n) * _UNIT_S[u] for n, u in found)
    try:
        at = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return max((at - (now or datetime.now(UTC))).total_seconds(), 0.0)


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if number == number else None  # NaN is no number
