"""The wire format of `POST /v1/auth/exchange`: RFC 8693's field names, Keel's token out."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ACCESS_TOKEN_TYPE",
    "GRANT_TYPE",
    "SUBJECT_TOKEN_TYPES",
    "IssuedToken",
    "TokenExchangeRequest",
]

GRANT_TYPE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:access_token"
SUBJECT_TOKEN_TYPES = (
    "urn:ietf:params:oauth:token-type:id_token",
    "urn:ietf:params:oauth:token-type:access_token",
    "urn:ietf:params:oauth:token-type:jwt",
)
SubjectTokenType = Literal[
    "urn:ietf:params:oauth:token-type:id_token",
    "urn:ietf:params:oauth:token-type:access_token",
    "urn:ietf:params:oauth:token-type:jwt",
]


class TokenExchangeRequest(BaseModel):
    """An identity provider's token (or a gateway's assertion) to trade for a Keel token;
    JSON, or form-encoded as RFC 8693 sends it."""

    model_config = ConfigDict(extra="ignore")

    grant_type: Literal["urn:ietf:params:oauth:grant-type:token-exchange"] = GRANT_TYPE
    """RFC 8693's grant type; optional, but any other value is refused."""
    subject_token: str = Field(min_length=1, max_length=16_384)
    """The provider's ID token, access token or signed assertion (a JWT)."""
    subject_token_type: SubjectTokenType = "urn:ietf:params:oauth:token-type:jwt"
    """What `subject_token` is; each of these is verified the same way, as a JWT."""
    requested_token_type: Literal["urn:ietf:params:oauth:token-type:access_token"] = (
        ACCESS_TOKEN_TYPE
    )
    """Keel issues access tokens only."""
    scope: str | None = Field(default=None, max_length=2048)
    """Space-separated scopes to narrow the grant to; never widens it."""


class IssuedToken(BaseModel):
    """A Keel bearer token (RFC 8693 section 2.2.1), accepted by every Keel surface."""

    access_token: str
    """The Keel token: send it as `Authorization: Bearer <access_token>`."""
    issued_token_type: Literal["urn:ietf:params:oauth:token-type:access_token"] = ACCESS_TOKEN_TYPE
    token_type: Literal["Bearer"] = "Bearer"
    expires_in: int
    """Seconds until it expires (`KEEL_EXCHANGE_TTL_S`)."""
    scope: str
    """The Keel scopes it carries, space-separated (only what the provider's mapping grants)."""
    tenant_id: str
    """The tenant it acts in."""
    subject: str
    """The user it names (`sub`)."""
