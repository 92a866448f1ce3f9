"""Bearer tokens for the coordinator's A2A calls, made in the worker, never in history."""

from __future__ import annotations

import time

import jwt

from keel.activities.outbound.url_prefix import longest_prefix, url_within
from keel.worker.config.local_secrets import local_secret
from keel.worker.config.settings import Settings

TOKEN_TTL_S = 3600


class A2ATokens:
    """Keel's own agents get a token for the run's tenant and requester; others, configured ones."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def __call__(self, url: str, tenant_id: str, requester: str) -> str | None:
        configured = self._settings.a2a_tokens
        prefix = longest_prefix(url, configured)
        if prefix is not None:
            return configured[prefix].get_secret_value()
        if not self._is_keel(url) or self._settings.auth_mode == "off":
            return None
        if self._settings.jwks_url is not None:
            return None  # tokens come from the identity provider: configure KEEL_A2A_TOKENS
        secret = self._settings.jwt_secret or local_secret(self._settings.data_dir)
        now = int(time.time())
        claims: dict[str, object] = {
            "tenant_id": tenant_id,
            "sub": requester.removeprefix("user:"),
            "scope": "",
            "iat": now,
            "nbf": now,
            "exp": now + TOKEN_TTL_S,
        }
        if self._settings.jwt_issuer:
            claims["iss"] = self._settings.jwt_issuer
        if self._settings.jwt_audience:
            claims["aud"] = self._settings.jwt_audience
        return jwt.encode(claims, secret.get_secret_value().encode(), algorithm="HS256")

    def _is_keel(self, url: str) -> bool:
        return any(url_within(url, mine) for mine in keel_urls(self._settings))


def keel_urls(settings: Settings) -> list[str]:
    """Where Keel's own API is reached: a coordination may call its agents whatever the
    webhook target policy, and they get a token Keel signs."""
    return [u for u in (settings.resolved_api_url, settings.public_url) if u]
