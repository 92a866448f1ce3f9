"""Bearer tokens for the coordinator's A2A calls, made in the worker, never in history."""

from __future__ import annotations

import time

import jwt

from worker.local_secrets import local_secret
from worker.settings import Settings

TOKEN_TTL_S = 3600


class A2ATokens:
    """Keel's own agents get a token for the run's tenant and requester; others, configured ones."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def __call__(self, url: str, tenant_id: str, requester: str) -> str | None:
        for prefix, token in self._settings.a2a_tokens.items():
            if url.startswith(prefix):
                return token.get_secret_value()
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
        mine = [self._settings.resolved_api_url, self._settings.public_url or ""]
        return any(m and url.startswith(m.rstrip("/")) for m in mine)
