"""Keel's own tokens, the ones `POST /v1/auth/exchange` issues.

They are HS256 JWTs signed with a key derived from the server's exchange secret for this
purpose only (`keel-token-exchange-v1`), so they verify whether Keel's verifier is set up
for an HS256 secret or for an identity provider's JWKS. Their header names the key id
`keel-exchange-1` and their `iss` is `keel`: the verifier checks those tokens with this
key and nothing else, and every other token as before.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import TYPE_CHECKING, Any

import jwt
from pydantic import SecretStr

if TYPE_CHECKING:  # the verifier (auth) imports this module's constants
    from keel.api.identity.auth import Principal

__all__ = ["ISSUED_ISSUER", "ISSUED_KID", "issue_token", "issuing_key"]

ISSUED_KID = "keel-exchange-1"
ISSUED_ISSUER = "keel"
KEY_LABEL = b"keel-token-exchange-v1"


def issuing_key(secret: SecretStr) -> bytes:
    """The signing key of issued tokens: never the secret itself, so a token signed with
    the secret (`keel token`) and one Keel issued are told apart by their key."""
    return hmac.new(secret.get_secret_value().encode(), KEY_LABEL, hashlib.sha256).digest()


def issue_token(key: bytes, principal: Principal, *, ttl_s: int, provider: str) -> str:
    """A Keel bearer token for `principal`, valid for `ttl_s` seconds."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": ISSUED_ISSUER,
        "tenant_id": principal.tenant_id,
        "sub": principal.subject,
        "roles": list(principal.roles),
        "scope": " ".join(principal.scopes),
        "idp": provider,
        "iat": now,
        "nbf": now,
        "exp": now + ttl_s,
        "jti": secrets.token_urlsafe(12),
    }
    return jwt.encode(claims, key, algorithm="HS256", headers={"kid": ISSUED_KID})
