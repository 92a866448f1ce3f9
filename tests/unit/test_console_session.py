"""Console session cookies: what they carry, when they are refused, and the CSRF rule."""

from __future__ import annotations

import time

import jwt
import pytest
from pydantic import SecretStr

from keel.api.identity.auth import AuthConfig, AuthError, TokenVerifier, dev_token
from keel.api.identity.console_session import ConsoleSessions, console_link_token

SECRET = SecretStr("unit-secret-0123456789abcdef0123456789abcdef")


@pytest.fixture
def verifier() -> TokenVerifier:
    return TokenVerifier(AuthConfig(hs256_secret=SECRET))


def test_a_pasted_tokens_session_ends_with_the_token(verifier: TokenVerifier) -> None:
    sessions = ConsoleSessions(SECRET, max_age_s=8 * 3600)
    token = dev_token(SECRET, "acme", "eve", ttl_s=600)
    cookie, session = sessions.exchange(token, verifier)
    assert session.principal.tenant_id == "acme" and session.principal.subject == "eve"
    assert session.expires_at <= int(time.time()) + 600
    assert sessions.read(cookie).principal == session.principal


def test_a_sign_in_link_opens_a_full_session(verifier: TokenVerifier) -> None:
    sessions = ConsoleSessions(SECRET, max_age_s=8 * 3600)
    link = console_link_token(SECRET, "default", "local", ["keel:admin"], ttl_s=60)
    _, session = sessions.exchange(link, verifier)
    assert session.expires_at >= int(time.time()) + 8 * 3600 - 5
    assert session.principal.is_admin


def test_writes_need_the_csrf_header_reads_do_not(verifier: TokenVerifier) -> None:
    sessions = ConsoleSessions(SECRET, max_age_s=3600)
    cookie, session = sessions.exchange(dev_token(SECRET, "t", "u"), verifier)
    assert sessions.principal_for(cookie, "GET", None).subject == "u"
    with pytest.raises(AuthError, match="CSRF"):
        sessions.principal_for(cookie, "POST", None)
    with pytest.raises(AuthError, match="CSRF"):
        sessions.principal_for(cookie, "DELETE", "wrong")
    assert sessions.principal_for(cookie, "POST", session.csrf).subject == "u"


def test_forged_expired_and_signed_out_cookies_are_refused(verifier: TokenVerifier) -> None:
    sessions = ConsoleSessions(SECRET, max_age_s=3600)
    cookie, _ = sessions.exchange(dev_token(SECRET, "t", "u"), verifier)
    other = ConsoleSessions(SecretStr("another-secret-0123456789abcdef0123456789"), max_age_s=60)
    with pytest.raises(AuthError, match="not valid"):
        other.read(cookie)
    # A bearer token is not a cookie, even one signed with the server's own secret.
    with pytest.raises(AuthError, match="not valid"):
        sessions.read(dev_token(SECRET, "t", "u"))
    claims = jwt.decode(cookie, options={"verify_signature": False})
    claims["exp"] = int(time.time()) - 100
    stale = jwt.encode(claims, sessions._key, algorithm="HS256")
    with pytest.raises(AuthError, match="expired"):
        sessions.read(stale)
    sessions.sign_out(cookie)
    with pytest.raises(AuthError, match="signed out"):
        sessions.read(cookie)
