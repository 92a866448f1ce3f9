"""Who may sign users in through `POST /v1/auth/exchange`: the configured identity providers.

`KEEL_IDENTITY_PROVIDERS` is a JSON list of these. Each names the issuer its tokens carry
(`iss`, how a token finds its provider), the audience they must name, how their signature
is checked (an OIDC provider's JWKS, or a trusted gateway's HS256 secret or public key),
which algorithms are allowed, how claims map to Keel's tenant, user and roles, and which
Keel scopes each role is granted. A token never brings its own scopes: what the issued
token carries is only what `scopes_by_role` grants, so an identity provider's token
cannot mint `keel:admin` unless the mapping gives it to one of its roles.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

__all__ = ["ASYMMETRIC_ALGORITHMS", "IdentityProvider", "ProviderAlgorithm"]

ProviderAlgorithm = Literal["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "HS256"]
ASYMMETRIC_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "ES256", "ES384"})
MIN_SECRET_BYTES = 32


def _rs256_only() -> list[ProviderAlgorithm]:
    return ["RS256"]


class IdentityProvider(BaseModel):
    """One identity provider (or trusted gateway) whose tokens Keel exchanges for its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    """How audit rows and the issued token (`idp` claim) name this provider."""
    kind: Literal["oidc", "gateway"] = "oidc"
    """`oidc`: ID or access tokens checked against `jwks_url`; `gateway`: assertions a
    trusted gateway signs with `hs256_secret`, `public_key_pem` or its own `jwks_url`."""
    issuer: str = Field(min_length=1, max_length=512)
    """The `iss` its tokens carry; a token is checked against the provider it names."""
    audience: str | list[str] = Field(min_length=1)
    """The `aud` its tokens must name (one of them, if several)."""
    jwks_url: str | None = None
    """Where its public keys are published (OIDC `jwks_uri`)."""
    hs256_secret: SecretStr | None = None
    """A gateway's shared secret (at least 32 bytes); allows only HS256."""
    public_key_pem: str | None = None
    """A gateway's public key, PEM, when it publishes no JWKS."""
    algorithms: list[ProviderAlgorithm] = Field(default_factory=_rs256_only, min_length=1)
    """Signature algorithms accepted; the key's own algorithm must be one of them."""
    tenant: str | None = Field(default=None, min_length=1, max_length=128)
    """The Keel tenant every user of this provider belongs to; or use `tenant_claim`."""
    tenant_claim: str | None = Field(default=None, min_length=1)
    """The claim naming the user's tenant (a dotted path reaches into objects)."""
    subject_claim: str = "sub"
    """The claim naming the user; the issued token's `sub`."""
    roles_claim: str | None = "roles"
    """The claim listing the user's roles (e.g. `realm_access.roles`); None: no roles."""
    scopes_by_role: dict[str, list[str]] = Field(default_factory=dict)
    """Keel scopes granted per role; `*` grants to every user of this provider."""
    leeway_s: int = Field(default=30, ge=0, le=600)
    """Clock skew tolerated on `exp`, `nbf` and `iat`."""

    @model_validator(mode="after")
    def _check(self) -> IdentityProvider:
        keys = [k for k in (self.jwks_url, self.hs256_secret, self.public_key_pem) if k]
        if len(keys) != 1:
            raise ValueError(
                f"Identity provider {self.name!r} needs exactly one of jwks_url, "
                "hs256_secret or public_key_pem."
            )
        if (self.tenant is None) == (self.tenant_claim is None):
            raise ValueError(
                f"Identity provider {self.name!r} needs exactly one of tenant (fixed) "
                "or tenant_claim."
            )
        if self.kind == "oidc" and not self.jwks_url:
            raise ValueError(f"OIDC provider {self.name!r} needs its jwks_url.")
        if self.jwks_url and not self.jwks_url.startswith(("https://", "http://")):
            raise ValueError(f"The jwks_url of {self.name!r} must start with https://.")
        if self.hs256_secret is not None:
            if self.algorithms != ["HS256"]:
                raise ValueError(
                    f"Gateway {self.name!r} signs with a shared secret: set algorithms "
                    'to ["HS256"] alone.'
                )
            if len(self.hs256_secret.get_secret_value().encode()) < MIN_SECRET_BYTES:
                raise ValueError(
                    f"The hs256_secret of {self.name!r} must be at least {MIN_SECRET_BYTES} bytes."
                )
        elif "HS256" in self.algorithms:
            # A public key used as an HMAC secret would let anyone forge tokens.
            raise ValueError(
                f"HS256 is only for a gateway with hs256_secret; remove it from "
                f"the algorithms of {self.name!r}."
            )
        return self

    @property
    def audiences(self) -> list[str]:
        return [self.audience] if isinstance(self.audience, str) else list(self.audience)
