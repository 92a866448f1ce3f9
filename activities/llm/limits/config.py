"""A configured provider rate limit: what one endpoint (and key) allows per window.

Limits are configured per endpoint (`base_url`), and apply to each key a worker uses
there on its own, as providers count them: the state is kept per endpoint and hash of
the key, so two keys of one endpoint never share a limit, and no key is ever stored.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["ProviderLimit", "check_unique", "endpoint_of", "key_hash"]

KEY_HASH_CHARS = 16
"""Of the key's SHA-256: enough to tell a worker's keys apart, useless to find one."""
_HEX = re.compile(r"^[0-9a-f]{8,64}$")
PACE_SLACK_S = 0.25
"""Keel spreads a window's calls over the window and this much more: the time between a
reservation and the request reaching the provider differs from call to call (a busy
worker, a new connection), and without slack one late call and one early one would land
in the same window. A quarter second costs a 60-a-minute limit 0.4% of its pace."""


def endpoint_of(base_url: str) -> str:
    """A base URL as limits are matched: scheme and host in lower case, no trailing `/`."""
    parts = urlsplit(base_url.strip())
    path = parts.path.rstrip("/")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{path}"


def key_hash(api_key: str | None) -> str:
    """The hash a key's state is kept under; "" for no key."""
    if not api_key:
        return ""
    return hashlib.sha256(api_key.encode()).hexdigest()[:KEY_HASH_CHARS]


class ProviderLimit(BaseModel):
    """`KEEL_PROVIDER_LIMITS` entry: the limits of one provider endpoint."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(min_length=1, description="The endpoint, as OPENAI_BASE_URL names it.")
    key_sha256: str | None = Field(
        default=None,
        description="Only for the key whose SHA-256 (hex) starts with this (8 or more "
        "characters); none: every key used at this endpoint, each counted on its own.",
    )
    requests: int | None = Field(default=None, ge=1, description="Requests per window.")
    tokens: int | None = Field(
        default=None, ge=1, description="Tokens per window (the request's estimate, then usage)."
    )
    concurrent: int | None = Field(default=None, ge=1, description="Calls in flight at once.")
    window_s: float = Field(
        default=60.0, gt=0, le=86_400, description="The window `requests` and `tokens` count in."
    )

    @field_validator("base_url")
    @classmethod
    def _is_url(cls, value: str) -> str:
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"base_url {value!r} is not an http(s) URL; write it as OPENAI_BASE_URL or "
                "ANTHROPIC_BASE_URL is written, e.g. https://api.openai.com/v1."
            )
        return endpoint_of(value)

    @field_validator("key_sha256")
    @classmethod
    def _is_hex(cls, value: str | None) -> str | None:
        if value is not None and not _HEX.match(value.lower()):
            raise ValueError(
                "key_sha256 is the start of the key's SHA-256 in hex (8 to 64 characters, "
                'e.g. from `printf %s "$OPENAI_API_KEY" | sha256sum`), never the key.'
            )
        return value.lower() if value is not None else None

    @model_validator(mode="after")
    def _limits_something(self) -> ProviderLimit:
        if self.requests is None and self.tokens is None and self.concurrent is None:
            raise ValueError(
                f"The limit for {self.base_url} sets none of requests, tokens or "
                "concurrent; set at least one."
            )
        return self

    def covers(self, endpoint: str, api_key: str | None) -> bool:
        """Whether calls to `endpoint` with `api_key` fall under this limit."""
        if endpoint_of(endpoint) != self.base_url:
            return False
        if self.key_sha256 is None:
            return True
        full = hashlib.sha256((api_key or "").encode()).hexdigest()
        return full.startswith(self.key_sha256)

    @property
    def request_interval_s(self) -> float:
        """Seconds between two calls' starts: the window spread evenly over its requests."""
        return (self.window_s + PACE_SLACK_S) / self.requests if self.requests else 0.0

    @property
    def token_interval_s(self) -> float:
        """Seconds one token holds the next call back."""
        return (self.window_s + PACE_SLACK_S) / self.tokens if self.tokens else 0.0


def check_unique(limits: list[ProviderLimit]) -> list[ProviderLimit]:
    """`limits`, refused when two name the same endpoint and key."""
    seen: set[tuple[str, str | None]] = set()
    for limit in limits:
        key = (limit.base_url, limit.key_sha256)
        if key in seen:
            raise ValueError(
                f"KEEL_PROVIDER_LIMITS names {limit.base_url} twice"
                + (f" for key {limit.key_sha256}" if limit.key_sha256 else "")
                + "; give each endpoint (and key) one entry."
            )
        seen.add(key)
    return limits
