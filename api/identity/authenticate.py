"""Who is calling, for every surface: REST, A2A and MCP authenticate through here.

A JWKS fetch is network I/O, so verification runs in a thread whenever a key set is
configured (a key server that never answers must not freeze the API); a refused token
is audited before the 401 (rate-limited per client and reason, under the orphan tenant);
an unreachable key set is `Unavailable` (503), not a refusal, since the caller's token
may be fine.
"""

from __future__ import annotations

import asyncio

from keel.api.core.audit_trail import ApiAudit
from keel.api.core.errors import Unauthenticated, Unavailable
from keel.api.identity.auth import (
    AuthConfig,
    AuthError,
    KeySetUnavailable,
    Principal,
    TokenVerifier,
    claimed_tenant,
    principal_from_request,
)

KEY_SET_RETRY_AFTER_S = 10


class Authenticator:
    """Turns an `Authorization` header into the verified caller, or refuses it."""

    def __init__(self, config: AuthConfig, verifier: TokenVerifier | None, audit: ApiAudit) -> None:
        self.config = config
        self._verifier = verifier
        self._audit = audit

    async def __call__(self, header: str | None, *, path: str, client: str | None) -> Principal:
        """The caller; `Unauthenticated` (audited) or `Unavailable` if there is none."""
        try:
            if self.config.jwks_url:
                return await asyncio.to_thread(
                    principal_from_request, header, self._verifier, self.config.mode
                )
            return principal_from_request(header, self._verifier, self.config.mode)
        except KeySetUnavailable as exc:
            raise Unavailable(exc.message, retry_after_s=KEY_SET_RETRY_AFTER_S) from exc
        except AuthError as exc:
            await self._audit.auth_refused(
                exc.message, path, client, claimed_tenant=claimed_tenant(header)
            )
            raise Unauthenticated(exc.message) from exc
