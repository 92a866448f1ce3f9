"""Checking an identity provider's token for the exchange, and who it says the user is.

A token finds its provider by the issuer it names (`iss`, unverified, only to choose);
it is then verified against that provider alone: its key (JWKS, shared secret or
public key), its allowed algorithms (the key's own, never the header's choice), its
audience, issuer and expiry. Claims map to a Keel `Principal` as the provider's
configuration says; scopes come only from its `scopes_by_role`, never from the token.

`verify` may fetch a JWKS over the network, so call it from a thread.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import jwt

from keel.activities.store.orphan_tenant import is_reserved_tenant
from keel.api.identity.auth import (
    MAX_TOKEN_CHARS,
    AuthError,
    KeySetUnavailable,
    Principal,
    _explain,
    _string_list,
)
from keel.worker.config.identity_providers import ASYMMETRIC_ALGORITHMS, IdentityProvider

__all__ = ["ExchangeRefused", "IdentityProviders", "VerifiedIdentity"]

EVERYONE = "*"
_TENANT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")
MAX_SUBJECT_CHARS = 256


class ExchangeRefused(AuthError):
    """A token the exchange will not take (401); says which provider, if one was found."""

    def __init__(
        self, message: str, *, provider: str | None = None, claimed_tenant: str | None = None
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.claimed_tenant = claimed_tenant


class VerifiedIdentity:
    """Who the provider vouches for, as Keel will name them."""

    def __init__(self, principal: Principal, provider: IdentityProvider) -> None:
        self.principal = principal
        self.provider = provider


class IdentityProviders:
    """The configured providers, each with its key source, ready to verify tokens."""

    def __init__(
        self,
        providers: Sequence[IdentityProvider],
        *,
        jwks_clients: dict[str, jwt.PyJWKClient] | None = None,
    ) -> None:
        self._by_issuer: dict[str, IdentityProvider] = {}
        for provider in providers:
            if provider.issuer in self._by_issuer:
                raise ValueError(
                    f"Two identity providers name the issuer {provider.issuer!r}; "
                    "give each provider its own."
                )
            self._by_issuer[provider.issuer] = provider
        self._jwks = dict(jwks_clients or {})
        for provider in providers:
            if provider.jwks_url and provider.name not in self._jwks:
                self._jwks[provider.name] = jwt.PyJWKClient(
                    provider.jwks_url, cache_keys=True, lifespan=300, timeout=5
                )

    def __bool__(self) -> bool:
        return bool(self._by_issuer)

    def verify(self, token: str) -> VerifiedIdentity:
        """The user a provider's valid token names; `ExchangeRefused` otherwise."""
        if not token or len(token) > MAX_TOKEN_CHARS:
            raise ExchangeRefused("The subject_token is empty or too long; send a JWT.")
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
            alg = jwt.get_unverified_header(token).get("alg")
        except jwt.PyJWTError:
            raise ExchangeRefused("The subject_token is not a well-formed JWT.") from None
        issuer = unverified.get("iss")
        provider = self._by_issuer.get(issuer) if isinstance(issuer, str) else None
        claimed = _claimed_tenant(unverified, provider)
        if provider is None:
            raise ExchangeRefused(
                "The subject_token comes from an issuer this server does not trust; "
                "get a token from a configured identity provider.",
                claimed_tenant=claimed,
            )
        try:
            claims = self._decode(token, alg, provider)
            return VerifiedIdentity(_principal(claims, provider), provider)
        except KeySetUnavailable:
            raise
        except AuthError as exc:
            raise ExchangeRefused(
                exc.message, provider=provider.name, claimed_tenant=claimed
            ) from None

    def _decode(self, token: str, alg: object, provider: IdentityProvider) -> dict[str, Any]:
        allowed: Sequence[str] = provider.algorithms
        if alg not in allowed:
            raise AuthError(_refused_algorithm(allowed))
        key: Any
        if provider.hs256_secret is not None:
            key, algorithms = provider.hs256_secret.get_secret_value().encode(), ["HS256"]
        elif provider.public_key_pem is not None:
            key, algorithms = provider.public_key_pem, [str(alg)]
        else:
            signing_key = self._signing_key(token, provider)
            if signing_key.algorithm_name not in allowed or (
                signing_key.algorithm_name not in ASYMMETRIC_ALGORITHMS
            ):
                raise AuthError(_refused_algorithm(allowed))
            # The key's own algorithm, never the one the token's header picks.
            key, algorithms = signing_key, [signing_key.algorithm_name]
        try:
            return jwt.decode(
                token,
                key,
                algorithms=algorithms,
                audience=provider.audiences,
                issuer=provider.issuer,
                leeway=provider.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise AuthError(_explain(exc, algorithms)) from None

    def _signing_key(self, token: str, provider: IdentityProvider) -> jwt.PyJWK:
        client = self._jwks[provider.name]
        try:
            return client.get_signing_key_from_jwt(token)
        except jwt.PyJWKClientConnectionError:
            raise KeySetUnavailable(
                f"The key set of identity provider {provider.name!r} cannot be fetched "
                "right now; try again shortly."
            ) from None
        except jwt.PyJWTError:
            raise AuthError(
                "The subject_token's signing key is not in its provider's key set; "
                "sign in again to get a current token."
            ) from None


def _principal(claims: dict[str, Any], provider: IdentityProvider) -> Principal:
    subject = _claim(claims, provider.subject_claim)
    if not isinstance(subject, str) or not subject or len(subject) > MAX_SUBJECT_CHARS:
        raise AuthError(
            f"The token's {provider.subject_claim} claim must name the user "
            f"(a string of at most {MAX_SUBJECT_CHARS} characters)."
        )
    tenant: object = provider.tenant
    if tenant is None:
        assert provider.tenant_claim is not None  # the provider's validator ensures one
        tenant = _claim(claims, provider.tenant_claim)
        if isinstance(tenant, str) and is_reserved_tenant(tenant):
            raise AuthError(f"The tenant {tenant!r} is reserved for Keel's own records.")
        if not isinstance(tenant, str) or not _TENANT_ID.match(tenant):
            raise AuthError(
                f"The token's {provider.tenant_claim} claim must name a tenant "
                "(letters, digits and _.:@-, at most 128 characters)."
            )
    assert isinstance(tenant, str)
    if is_reserved_tenant(tenant):
        raise AuthError(f"The tenant {tenant!r} is reserved for Keel's own records.")
    roles: list[str] = []
    if provider.roles_claim is not None:
        roles = _string_list(_claim(claims, provider.roles_claim), provider.roles_claim)
    return Principal(
        tenant_id=tenant,
        subject=subject,
        roles=roles,
        scopes=granted_scopes(provider, roles),
    )


def granted_scopes(provider: IdentityProvider, roles: Sequence[str]) -> list[str]:
    """The scopes a user with `roles` gets: only what the provider's mapping grants."""
    scopes: list[str] = []
    for role in (EVERYONE, *roles):
        for scope in provider.scopes_by_role.get(role, []):
            if scope not in scopes:
                scopes.append(scope)
    return scopes


def _claim(claims: dict[str, Any], path: str) -> object:
    """A claim by name, or by a dotted path into nested objects (`realm_access.roles`)."""
    if path in claims:
        return claims[path]
    value: object = claims
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _claimed_tenant(claims: dict[str, Any], provider: IdentityProvider | None) -> str | None:
    """The tenant an unverified token would map to: a label for its audit row only."""
    if provider is not None and provider.tenant is not None:
        return provider.tenant
    name = provider.tenant_claim if provider is not None else None
    tenant = _claim(claims, name or "tenant_id")
    return tenant if isinstance(tenant, str) else None


def _refused_algorithm(allowed: Sequence[str]) -> str:
    return (
        "The subject_token is signed with an algorithm its provider is not allowed "
        f"(allowed: {', '.join(allowed)})."
    )
