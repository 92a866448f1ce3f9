"""Who is calling: JWT bearer tokens (HS256 secret or a JWKS) turned into a `Principal`.

Every request carries `Authorization: Bearer <jwt>` whose claims name the tenant
(`tenant_id`), the caller (`sub`), roles and scopes. A local dev mode without
auth (`mode="off"`) exists only when asked for; it acts as an admin of the
`default` tenant.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal, assert_never

import jwt
from pydantic import BaseModel, Field, SecretStr, model_validator

from keel.activities.store.orphan_tenant import is_reserved_tenant
from keel.api.identity.issued_tokens import ISSUED_ISSUER, ISSUED_KID, issuing_key

__all__ = [
    "ADMIN_SCOPE",
    "AuthConfig",
    "AuthError",
    "AuthMode",
    "KeySetUnavailable",
    "Principal",
    "TokenVerifier",
    "claimed_tenant",
    "dev_token",
    "principal_from_request",
]

AuthMode = Literal["jwt", "off"]

ADMIN_SCOPE = "keel:admin"
HMAC_ALGORITHMS = ("HS256",)
# Only asymmetric algorithms for JWKS keys: an HS token verified with a public key
# would let anyone who knows the public key forge tokens (algorithm confusion).
JWKS_ALGORITHMS = ("RS256", "ES256")
MIN_SECRET_BYTES = 32
# Far above any real token; refuses oversized headers before any parsing.
MAX_TOKEN_CHARS = 16_384


class AuthError(Exception):
    """The request's credentials were refused; a new or corrected token may help.

    The message is a sentence safe to return to the caller: it never contains
    the token.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class KeySetUnavailable(AuthError):
    """The JWKS endpoint could not be reached; retrying later may help (answer 503)."""


class Principal(BaseModel):
    """The verified caller of a request."""

    tenant_id: str
    """The tenant every read and write of this request is scoped to (`tenant_id` claim)."""
    subject: str
    """Who the caller is within the tenant (`sub` claim), e.g. a user or service id."""
    roles: list[str] = Field(default_factory=list)
    """Roles from the `roles` claim, as the identity provider assigned them."""
    scopes: list[str] = Field(default_factory=list)
    """Scopes from the `scope` claim (space-separated) and the `scp` claim (a list)."""

    @property
    def is_admin(self) -> bool:
        """Whether the caller may use admin endpoints (scope `keel:admin`)."""
        return self.has_scope(ADMIN_SCOPE)

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


LOCAL_PRINCIPAL = Principal(
    tenant_id="default", subject="local", roles=["admin"], scopes=[ADMIN_SCOPE]
)


class AuthConfig(BaseModel):
    """How requests are authenticated; validated on construction."""

    mode: AuthMode = "jwt"
    """`jwt` verifies bearer tokens; `off` trusts everyone as a local admin (dev only)."""
    hs256_secret: SecretStr | None = None
    """Shared secret for HS256 tokens, at least 32 bytes; exclusive with `jwks_url`."""
    jwks_url: str | None = None
    """URL of the identity provider's JSON Web Key Set for RS256/ES256 tokens."""
    issuer: str | None = None
    """Expected `iss` claim; unchecked when unset."""
    audience: str | None = None
    """Expected `aud` claim; when unset, tokens that name an audience are refused."""
    leeway_s: int = Field(default=30, ge=0, le=600)
    """Clock skew tolerated on `exp`, `nbf` and `iat`, in seconds."""
    issued_secret: SecretStr | None = None
    """The secret the key of Keel's own exchanged tokens derives from
    (`api.identity.issued_tokens`); None: this server accepts none."""

    @model_validator(mode="after")
    def _check_combination(self) -> AuthConfig:
        if self.mode == "off":
            return self
        if self.hs256_secret is not None and self.jwks_url:
            raise ValueError(
                "Set either an HS256 secret or a JWKS URL for JWT auth, not both; "
                "remove one of them."
            )
        if self.hs256_secret is None and not self.jwks_url:
            raise ValueError(
                "JWT auth needs an HS256 secret or a JWKS URL; set one, "
                "or turn auth off explicitly for local development."
            )
        if self.hs256_secret is not None:
            length = len(self.hs256_secret.get_secret_value().encode())
            if length < MIN_SECRET_BYTES:
                raise ValueError(
                    f"The HS256 secret is {length} bytes; use at least {MIN_SECRET_BYTES} "
                    "random bytes (for example `openssl rand -hex 32`)."
                )
        if self.jwks_url and not self.jwks_url.startswith(("https://", "http://")):
            raise ValueError("The JWKS URL must start with https:// (or http:// for local tests).")
        return self


class TokenVerifier:
    """Verifies bearer tokens against an `AuthConfig` in `jwt` mode.

    `verify` may fetch the JWKS over the network on a cache miss, so call it
    from a thread (a plain `def` FastAPI dependency does) rather than the event loop.
    """

    def __init__(self, config: AuthConfig, *, jwks_client: jwt.PyJWKClient | None = None) -> None:
        if config.mode != "jwt":
            raise ValueError("TokenVerifier needs an AuthConfig in jwt mode.")
        self._config = config
        self._secret: bytes | None = None
        self._jwks: jwt.PyJWKClient | None = None
        self._issued_key: bytes | None = None
        if config.issued_secret is not None:
            self._issued_key = issuing_key(config.issued_secret)
        if config.hs256_secret is not None:
            self._secret = config.hs256_secret.get_secret_value().encode()
        else:
            assert config.jwks_url is not None  # guaranteed by AuthConfig's validator
            self._jwks = jwks_client or jwt.PyJWKClient(
                config.jwks_url, cache_keys=True, lifespan=300, timeout=5
            )

    def verify(self, token: str) -> Principal:
        """Return the caller named by a valid token; raise `AuthError` otherwise."""
        if not token or len(token) > MAX_TOKEN_CHARS:
            raise AuthError("The bearer token is empty or too long; send a JWT.")
        key: jwt.PyJWK | bytes
        algorithms: Sequence[str]
        config = self._config
        issuer, audience = config.issuer, config.audience
        if self._issued_key is not None and _key_id(token) == ISSUED_KID:
            # One of Keel's own exchanged tokens: its own key, issuer and no audience.
            key, algorithms = self._issued_key, HMAC_ALGORITHMS
            issuer, audience = ISSUED_ISSUER, None
        elif self._secret is not None:
            key, algorithms = self._secret, HMAC_ALGORITHMS
        else:
            key, algorithms = self._jwks_key(token)
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=list(algorithms),
                audience=audience,
                issuer=issuer,
                leeway=config.leeway_s,
                options={"require": ["exp", "sub", "tenant_id"]},
            )
        except jwt.PyJWTError as exc:
            raise AuthError(_explain(exc, algorithms)) from None
        return _principal(claims)

    def _jwks_key(self, token: str) -> tuple[jwt.PyJWK, Sequence[str]]:
        assert self._jwks is not None
        try:
            alg = jwt.get_unverified_header(token).get("alg")
        except jwt.PyJWTError:
            raise AuthError("The bearer token is not a well-formed JWT.") from None
        if alg not in JWKS_ALGORITHMS:
            raise AuthError(_algorithm_refused(JWKS_ALGORITHMS))
        try:
            signing_key = self._jwks.get_signing_key_from_jwt(token)
        except jwt.PyJWKClientConnectionError:
            raise KeySetUnavailable(
                "The identity provider's key set could not be fetched; try again shortly."
            ) from None
        except jwt.PyJWTError:
            raise AuthError(
                "No key in the identity provider's key set matches the token's key id; "
                "sign in again to get a current token."
            ) from None
        if signing_key.algorithm_name not in JWKS_ALGORITHMS:
            raise AuthError(_algorithm_refused(JWKS_ALGORITHMS))
        # Verify with the key's own algorithm, never one the token header picks.
        return signing_key, [signing_key.algorithm_name]


def principal_from_request(
    authorization_header: str | None,
    verifier: TokenVerifier | None,
    mode: AuthMode,
) -> Principal:
    """The caller of a request from its `Authorization` header."""
    if mode == "off":
        return LOCAL_PRINCIPAL.model_copy(deep=True)
    if mode == "jwt":
        if verifier is None:
            raise RuntimeError("JWT auth is on but no TokenVerifier was built; this is a bug.")
        return verifier.verify(_bearer_token(authorization_header))
    assert_never(mode)


def dev_token(
    secret: str | SecretStr,
    tenant_id: str,
    sub: str,
    scopes: Sequence[str] = (),
    ttl_s: int = 3600,
    *,
    roles: Sequence[str] = (),
    issuer: str | None = None,
    audience: str | None = None,
) -> str:
    """Mint an HS256 token for local use and tests; the secret must match the server's."""
    raw = secret.get_secret_value() if isinstance(secret, SecretStr) else secret
    now = int(time.time())
    claims: dict[str, Any] = {
        "tenant_id": tenant_id,
        "sub": sub,
        "roles": list(roles),
        "scope": " ".join(scopes),
        "iat": now,
        "nbf": now,
        "exp": now + ttl_s,
    }
    if issuer is not None:
        claims["iss"] = issuer
    if audience is not None:
        claims["aud"] = audience
    return jwt.encode(claims, raw.encode(), algorithm="HS256")


def _bearer_token(header: str | None) -> str:
    parts = (header or "").split()
    if not parts:
        raise AuthError("This endpoint needs a bearer token; send `Authorization: Bearer <token>`.")
    if parts[0].lower() != "bearer":
        raise AuthError(
            "The Authorization header must use the Bearer scheme; "
            "send `Authorization: Bearer <token>`."
        )
    if len(parts) != 2:
        raise AuthError("The Authorization header must be `Bearer <token>` with exactly one token.")
    return parts[1]


def _key_id(token: str) -> object:
    try:
        return jwt.get_unverified_header(token).get("kid")
    except jwt.PyJWTError:
        return None  # the verification that follows says what is wrong with it


def claimed_tenant(authorization_header: str | None) -> str | None:
    """The tenant a refused token claims, unverified: only a label for its audit row."""
    parts = (authorization_header or "").split()
    if len(parts) != 2 or len(parts[1]) > MAX_TOKEN_CHARS:
        return None
    try:
        claims = jwt.decode(parts[1], options={"verify_signature": False})
    except jwt.PyJWTError:
        return None
    tenant = claims.get("tenant_id")
    return tenant if isinstance(tenant, str) else None


def _principal(claims: dict[str, Any]) -> Principal:
    tenant_id, subject = claims.get("tenant_id"), claims.get("sub")
    if not isinstance(tenant_id, str) or not tenant_id:
        raise AuthError("The token's tenant_id claim must be a non-empty string.")
    if is_reserved_tenant(tenant_id):
        raise AuthError(
            f"The tenant {tenant_id!r} is reserved for Keel's own records; "
            "get a token for your tenant."
        )
    if not isinstance(subject, str) or not subject:
        raise AuthError("The token's sub claim must be a non-empty string.")
    return Principal(
        tenant_id=tenant_id,
        subject=subject,
        roles=_string_list(claims.get("roles"), "roles"),
        scopes=_scopes(claims),
    )


def _scopes(claims: dict[str, Any]) -> list[str]:
    scopes: list[str] = []
    for name in ("scope", "scp"):
        for scope in _string_list(claims.get(name), name):
            if scope not in scopes:
                scopes.append(scope)
    return scopes


def _string_list(value: object, claim: str) -> list[str]:
    """A claim given as a space-separated string or a list of strings."""
    if value is None:
        return []
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise AuthError(f"The token's {claim} claim must be a string or a list of strings.")


def _algorithm_refused(allowed: Sequence[str]) -> str:
    return (
        "The token is signed with an algorithm this server does not accept "
        f"(allowed: {', '.join(allowed)}); get a token from the configured issuer."
    )


def _explain(exc: jwt.PyJWTError, algorithms: Sequence[str]) -> str:
    """A sentence for the caller; PyJWT's own messages may quote token content."""
    if isinstance(exc, jwt.ExpiredSignatureError):
        return "The token has expired; sign in again or mint a new token."
    if isinstance(exc, jwt.ImmatureSignatureError):
        return "The token is not valid yet; check the clocks of the issuer and this server."
    if isinstance(exc, jwt.InvalidAlgorithmError):
        return _algorithm_refused(algorithms)
    if isinstance(exc, jwt.InvalidSignatureError):
        return "The token's signature does not verify; it was not issued for this server."
    if isinstance(exc, jwt.InvalidAudienceError):
        return "The token was issued for another audience; get a token for this server."
    if isinstance(exc, jwt.InvalidIssuerError):
        return "The token comes from an issuer this server does not trust."
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return f"The token lacks the required {exc.claim} claim; get a token that names it."
    if isinstance(exc, jwt.InvalidTokenError):
        return "The bearer token is not a valid JWT."
    return "The bearer token could not be verified."
