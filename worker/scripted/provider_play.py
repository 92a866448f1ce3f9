"""What the scripted provider does besides playing turns: a rate limit and failing models.

- `rate_limit`: at most `requests` chat requests in any `window_s`; one past it is
  answered 429 with `retry-after` (and `retry-after-ms`) saying when a slot frees, and
  every answer carries OpenAI's `x-ratelimit-limit-requests`, `-remaining-requests` and
  `-reset-requests`, as a real endpoint's do.
- `model_failures`: a model name and the HTTP status every request naming it gets (529,
  503, 404 for an unknown model), so a run's fallback model has to take its steps.

Requests are timed on the monotonic clock, so a test can check the pace it saw.
"""

from __future__ import annotations

import collections
import math
import threading
import time

from pydantic import BaseModel, Field
from starlette.responses import JSONResponse, Response

__all__ = ["ProviderPlay", "RateLimit"]


class RateLimit(BaseModel):
    """A requests-per-window limit the scripted provider enforces."""

    requests: int = Field(ge=1)
    window_s: float = Field(gt=0)


def _seconds(value: float) -> str:
    return f"{max(value, 0.0):.3f}".rstrip("0").rstrip(".") or "0"


class ProviderPlay:
    """The scripted provider's limit and failing models, and what it saw."""

    def __init__(self, rate_limit: RateLimit | None, model_failures: dict[str, int]) -> None:
        self._limit = rate_limit
        self._failures = model_failures
        self._lock = threading.Lock()
        self._window: collections.deque[float] = collections.deque()
        self.received_at: list[float] = []
        """When each chat request came (monotonic seconds), refused ones included."""
        self.rate_limited = 0
        """Requests answered 429 for being past the limit."""
        self.requests_by_model: collections.Counter[str] = collections.Counter()

    def reset(self) -> None:
        with self._lock:
            self._window.clear()
            self.received_at.clear()
            self.rate_limited = 0
            self.requests_by_model.clear()

    def refusal(self, body: object) -> Response | None:
        """The 429 or failure this request gets, or None: answer it."""
        model = str(body.get("model", "")) if isinstance(body, dict) else ""
        now = time.monotonic()
        with self._lock:
            self.received_at.append(now)
            self.requests_by_model[model] += 1
            if self._limit is not None:
                self._expire(now)
                if len(self._window) >= self._limit.requests:
                    self.rate_limited += 1
                    return self._too_many(now)
                self._window.append(now)
        status = self._failures.get(model)
        if status is not None:
            kind = "invalid_request_error" if status < 500 else "overloaded_error"
            code = "model_not_found" if status == 404 else None
            error = {"message": f"Scripted {status} for {model}.", "type": kind, "code": code}
            return JSONResponse({"error": error}, status_code=status)
        return None

    def stamp(self, response: Response) -> Response:
        """The limit's headers on an answer."""
        if self._limit is not None:
            with self._lock:
                response.headers.update(self._headers(time.monotonic()))
        return response

    def max_received_in_window(self) -> int:
        """The most requests that came within any one window (of the limit's length)."""
        assert self._limit is not None
        window = self._limit.window_s
        with self._lock:
            times = sorted(self.received_at)
        most, start = 0, 0
        for end, at in enumerate(times):
            while at - times[start] >= window:
                start += 1
            most = max(most, end - start + 1)
        return most

    def _expire(self, now: float) -> None:
        assert self._limit is not None
        while self._window and now - self._window[0] >= self._limit.window_s:
            self._window.popleft()

    def _reset_in(self, now: float) -> float:
        assert self._limit is not None
        return self._window[0] + self._limit.window_s - now if self._window else 0.0

    def _headers(self, now: float) -> dict[str, str]:
        assert self._limit is not None
        self._expire(now)
        return {
            "x-ratelimit-limit-requests": str(self._limit.requests),
            "x-ratelimit-remaining-requests": str(self._limit.requests - len(self._window)),
            "x-ratelimit-reset-requests": f"{_seconds(self._reset_in(now))}s",
        }

    def _too_many(self, now: float) -> JSONResponse:
        wait = self._reset_in(now)
        headers = self._headers(now)
        headers["retry-after"] = str(math.ceil(wait))
        headers["retry-after-ms"] = str(math.ceil(wait * 1000))
        error = {
            "message": f"Rate limit reached: {self._limit.requests if self._limit else 0} "
            "requests per window; try again later.",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
        return JSONResponse({"error": error}, status_code=429, headers=headers)
