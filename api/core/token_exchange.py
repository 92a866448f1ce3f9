"""The way in: an identity provider's token traded for a Keel token (`POST /v1/auth/exchange`).

A front end or gateway signs its user in with its own identity provider, then sends that
provider's token (or its own signed assertion) here and gets a short-lived Keel token
carrying the user's tenant, subject, roles and the scopes the provider's mapping grants
(`api.identity.exchange`). A refused token is audited under the orphan tenant before the
401 is sent, rate-limited like every refusal; an issued one is audited in the user's
tenant.
"""

from __future__ import annotations

import asyncio

from pydantic import SecretStr

from keel.activities.store.audit import AuditEntry
from keel.api.core.audit_trail import ApiAudit
from keel.api.core.errors import Unauthenticated, Unavailable
from keel.api.core.schemas.token_exchange import IssuedToken, TokenExchangeRequest
from keel.api.identity.auth import KeySetUnavailable, Principal
from keel.api.identity.exchange import ExchangeRefused, IdentityProviders
from keel.api.identity.issued_tokens import issue_token, issuing_key
from keel.worker.config.settings import Settings

__all__ = ["TokenExchange"]

KEY_SET_RETRY_AFTER_S = 10
NOT_CONFIGURED = (
    "This server exchanges no tokens: no identity provider is configured "
    "(KEEL_IDENTITY_PROVIDERS); use a Keel token instead."
)


class TokenExchange:
    """Verifies a provider's token, issues Keel's own, and audits both outcomes."""

    def __init__(
        self,
        settings: Settings,
        issued_secret: SecretStr | None,
        audit: ApiAudit,
        *,
        providers: IdentityProviders | None = None,
    ) -> None:
        self._providers = providers or IdentityProviders(settings.identity_providers)
        self._key = issuing_key(issued_secret) if issued_secret is not None else None
        self._ttl_s = settings.exchange_ttl_s
        self._audit = audit
        self._off = settings.auth_mode == "off"

    async def exchange(
        self, request: TokenExchangeRequest, *, path: str, client: str | None
    ) -> IssuedToken:
        """A Keel token for a valid provider token; `Unauthenticated` (audited) if not,
        `Unavailable` if the provider's key set cannot be fetched."""
        if self._off or self._key is None or not self._providers:
            await self._audit.auth_refused(NOT_CONFIGURED, path, client)
            raise Unauthenticated(NOT_CONFIGURED)
        try:
            # A JWKS fetch is network I/O: off the event loop.
            identity = await asyncio.to_thread(self._providers.verify, request.subject_token)
        except KeySetUnavailable as exc:
            raise Unavailable(exc.message, retry_after_s=KEY_SET_RETRY_AFTER_S) from exc
        except ExchangeRefused as exc:
            await self._audit.auth_refused(
                exc.message,
                path,
                client,
                claimed_tenant=exc.claimed_tenant,
                provider=exc.provider,
            )
            raise Unauthenticated(exc.message) from exc
        principal = _narrowed(identity.principal, request.scope)
        token = issue_token(
            self._key, principal, ttl_s=self._ttl_s, provider=identity.provider.name
        )
        await self._audit.log.append(
            AuditEntry(
                tenant_id=principal.tenant_id,
                actor=principal.subject,
                category="auth",
                action="token.exchanged",
                subject=identity.provider.name,
                detail={
                    "provider": identity.provider.name,
                    "roles": list(principal.roles),
                    "scopes": list(principal.scopes),
                    "expires_in": self._ttl_s,
                    "client": client,
                },
            )
        )
        return IssuedToken(
            access_token=token,
            expires_in=self._ttl_s,
            scope=" ".join(principal.scopes),
            tenant_id=principal.tenant_id,
            subject=principal.subject,
        )


def _narrowed(principal: Principal, requested: str | None) -> Principal:
    """The grant cut to the scopes asked for (RFC 8693 `scope`); asking never widens it."""
    if requested is None:
        return principal
    wanted = set(requested.split())
    return principal.model_copy(
        update={"scopes": [scope for scope in principal.scopes if scope in wanted]}
    )
