"""Console sign-in: a bearer token exchanged for a short-lived, HttpOnly session cookie.

A browser cannot put `Authorization` on an `EventSource`, and a token kept in page
script is one XSS away from theft, so the console signs in once and the API then
accepts a cookie it signed itself. The cookie is `HttpOnly` and `SameSite=Strict`;
because cookies ride along with any request the browser makes, every state-changing
call authenticated by the cookie must also carry the session's CSRF token in a header
the page adds (`X-Keel-CSRF`), which another site cannot read or forge.

The cookie is a JWT signed with a key derived from the server's secret, for its own
purpose only (`keel-console-session`), so a console cookie is never a bearer token and
a bearer token is never a console cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import Any

import jwt
from pydantic import BaseModel, SecretStr

from keel.api.identity.auth import AuthError, Principal, TokenVerifier

__all__ = [
    "COOKIE_NAME",
    "CSRF_HEADER",
    "LINK_PURPOSE",
    "ConsoleSession",
    "ConsoleSessions",
    "console_link_token",
]

COOKIE_NAME = "keel_console"
CSRF_HEADER = "x-keel-csrf"
LINK_PURPOSE = "console-sign-in"
"""The `keel_use` claim of a sign-in link's token: it may be exchanged once for a session."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
KEY_LABEL = b"keel-console-session-v1"


class ConsoleSession(BaseModel):
    """A signed-in browser: who it is, until when, and its CSRF token."""

    principal: Principal
    expires_at: int
    """Unix seconds after which the cookie is refused."""
    csrf: str
    """Sent back by the page in `X-Keel-CSRF` on every state-changing call."""
    session_id: str


class ConsoleSessions:
    """Mints and checks console session cookies; signs out by session id.

    Sign-out forgets the cookie in the browser and records its id here until it
    would have expired, so a copied cookie stops working too (per API process).
    """

    def __init__(self, server_secret: SecretStr, *, max_age_s: int) -> None:
        self._key = hmac.new(
            server_secret.get_secret_value().encode(), KEY_LABEL, hashlib.sha256
        ).digest()
        self.max_age_s = max_age_s
        self._signed_out: dict[str, int] = {}

    def exchange(self, token: str, verifier: TokenVerifier) -> tuple[str, ConsoleSession]:
        """A session cookie for a valid bearer token (or sign-in link token).

        A pasted token's session ends when the token does (at most `max_age_s`); a
        sign-in link's short-lived token opens a full session.
        """
        principal = verifier.verify(token)
        claims = jwt.decode(token, options={"verify_signature": False})  # verified above
        now = int(time.time())
        expires_at = now + self.max_age_s
        if claims.get("keel_use") != LINK_PURPOSE:
            expires_at = min(expires_at, int(claims["exp"]))
        session = ConsoleSession(
            principal=principal,
            expires_at=expires_at,
            csrf=secrets.token_urlsafe(24),
            session_id=secrets.token_urlsafe(12),
        )
        return self._sign(session), session

    def _sign(self, session: ConsoleSession) -> str:
        claims: dict[str, Any] = {
            "p": session.principal.model_dump(),
            "exp": session.expires_at,
            "csrf": session.csrf,
            "sid": session.session_id,
            "aud": "keel-console",
        }
        return jwt.encode(claims, self._key, algorithm="HS256")

    def read(self, cookie: str) -> ConsoleSession:
        """The session a cookie names; `AuthError` if it is forged, expired or signed out."""
        try:
            claims = jwt.decode(
                cookie,
                self._key,
                algorithms=["HS256"],
                audience="keel-console",
                options={"require": ["exp", "sid", "csrf", "p"]},
            )
            session = ConsoleSession(
                principal=Principal.model_validate(claims["p"]),
                expires_at=int(claims["exp"]),
                csrf=str(claims["csrf"]),
                session_id=str(claims["sid"]),
            )
        except jwt.ExpiredSignatureError:
            raise AuthError("Your console session has expired; sign in again.") from None
        except (jwt.PyJWTError, ValueError):
            raise AuthError("The console session cookie is not valid; sign in again.") from None
        if session.session_id in self._signed_out:
            raise AuthError("You signed out of the console; sign in again.")
        return session

    def principal_for(self, cookie: str, method: str, csrf_header: str | None) -> Principal:
        """The caller of a cookie-authenticated request; state changes need the CSRF header."""
        session = self.read(cookie)
        if method.upper() not in SAFE_METHODS and not (
            csrf_header and hmac.compare_digest(csrf_header, session.csrf)
        ):
            raise AuthError(
                "This console request lacks its CSRF token (X-Keel-CSRF); reload the page."
            )
        return session.principal

    def sign_out(self, cookie: str) -> None:
        try:
            session = self.read(cookie)
        except AuthError:
            return
        now = int(time.time())
        self._signed_out = {sid: exp for sid, exp in self._signed_out.items() if exp > now}
        self._signed_out[session.session_id] = session.expires_at


def console_link_token(
    secret: SecretStr,
    tenant_id: str,
    sub: str,
    scopes: list[str],
    *,
    ttl_s: int = 900,
    issuer: str | None = None,
    audience: str | None = None,
) -> str:
    """The token in a sign-in link `keel dev` prints: short-lived, for the exchange only."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "tenant_id": tenant_id,
        "sub": sub,
        "scope": " ".join(scopes),
        "iat": now,
        "nbf": now,
        "exp": now + ttl_s,
        "keel_use": LINK_PURPOSE,
    }
    if issuer is not None:
        claims["iss"] = issuer
    if audience is not None:
        claims["aud"] = audience
    return jwt.encode(claims, secret.get_secret_value().encode(), algorithm="HS256")
