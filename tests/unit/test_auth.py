"""JWT bearer identity: HS256 and JWKS verification, refusals, header parsing."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from pydantic import SecretStr, ValidationError

from keel.api.identity.auth import (
    AuthConfig,
    AuthError,
    KeySetUnavailable,
    Principal,
    TokenVerifier,
    dev_token,
    principal_from_request,
)

SECRET = "test-secret-that-is-long-enough-0123456789"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    values: dict[str, Any] = {"tenant_id": "acme", "sub": "alice", "iat": now, "exp": now + 600}
    values.update(overrides)
    return {k: v for k, v in values.items() if v is not None}


def hs_verifier(**config: Any) -> TokenVerifier:
    return TokenVerifier(AuthConfig(mode="jwt", hs256_secret=SecretStr(SECRET), **config))


def refused(verifier: TokenVerifier, token: str, match: str) -> AuthError:
    with pytest.raises(AuthError, match=match) as info:
        verifier.verify(token)
    assert_no_token_leak(info.value, token)
    return info.value


def assert_no_token_leak(error: AuthError, token: str) -> None:
    for text in (str(error), repr(error), error.message):
        assert token not in text
        for part in token.split("."):
            if len(part) > 8:
                assert part not in text
    # Nothing chained either: a logged traceback must not carry PyJWT's own messages.
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__


# -- HS256 ---------------------------------------------------------------------


def test_valid_hs256_token_gives_the_principal() -> None:
    token = dev_token(SECRET, "acme", "alice", scopes=["runs:read", "keel:admin"], roles=["dev"])
    principal = hs_verifier().verify(token)
    assert principal == Principal(
        tenant_id="acme", subject="alice", roles=["dev"], scopes=["runs:read", "keel:admin"]
    )
    assert principal.is_admin and principal.has_scope("runs:read")
    assert not principal.has_scope("runs:write")


def test_scp_list_and_scope_string_are_merged() -> None:
    token = jwt.encode(claims(scope="a b", scp=["b", "c"], roles=["x"]), SECRET, algorithm="HS256")
    principal = hs_verifier().verify(token)
    assert principal.scopes == ["a", "b", "c"]
    assert not principal.is_admin


def test_expired_token_is_refused() -> None:
    token = jwt.encode(claims(exp=int(time.time()) - 120), SECRET, algorithm="HS256")
    refused(hs_verifier(), token, "expired")


def test_expiry_within_leeway_is_accepted() -> None:
    token = jwt.encode(claims(exp=int(time.time()) - 5), SECRET, algorithm="HS256")
    assert hs_verifier(leeway_s=30).verify(token).subject == "alice"


def test_token_without_exp_is_refused() -> None:
    token = jwt.encode(claims(exp=None), SECRET, algorithm="HS256")
    refused(hs_verifier(), token, "exp claim")


def test_not_yet_valid_token_is_refused() -> None:
    future = int(time.time()) + 600
    refused(hs_verifier(), jwt.encode(claims(nbf=future), SECRET, "HS256"), "not valid yet")
    refused(hs_verifier(), jwt.encode(claims(iat=future), SECRET, "HS256"), "not valid yet")


def test_wrongly_signed_token_is_refused() -> None:
    token = dev_token("another-secret-that-is-also-long-enough!!", "acme", "alice")
    refused(hs_verifier(), token, "signature does not verify")


def test_tampered_payload_is_refused() -> None:
    header, _, signature = dev_token(SECRET, "acme", "alice").split(".")
    forged = b64url(json.dumps(claims(tenant_id="other")).encode())
    refused(hs_verifier(), f"{header}.{forged}.{signature}", "signature does not verify")


@pytest.mark.parametrize("alg", ["none", "None", "NONE"])
def test_unsigned_alg_none_token_is_refused(alg: str) -> None:
    header = b64url(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    payload = b64url(json.dumps(claims(scope="keel:admin")).encode())
    refused(hs_verifier(), f"{header}.{payload}.", "algorithm")


def test_missing_tenant_id_is_refused() -> None:
    token = jwt.encode(claims(tenant_id=None), SECRET, algorithm="HS256")
    refused(hs_verifier(), token, "tenant_id claim")


def test_empty_or_non_string_tenant_id_is_refused() -> None:
    refused(hs_verifier(), jwt.encode(claims(tenant_id=""), SECRET, "HS256"), "tenant_id")
    refused(hs_verifier(), jwt.encode(claims(tenant_id=7), SECRET, "HS256"), "tenant_id")


def test_missing_sub_is_refused() -> None:
    token = jwt.encode(claims(sub=None), SECRET, algorithm="HS256")
    refused(hs_verifier(), token, "sub claim")


def test_audience_and_issuer_are_checked_when_configured() -> None:
    verifier = hs_verifier(issuer="https://idp.example", audience="keel")
    good = dev_token(SECRET, "acme", "alice", issuer="https://idp.example", audience="keel")
    assert verifier.verify(good).tenant_id == "acme"

    wrong_aud = dev_token(SECRET, "acme", "alice", issuer="https://idp.example", audience="x")
    refused(verifier, wrong_aud, "another audience")
    no_aud = dev_token(SECRET, "acme", "alice", issuer="https://idp.example")
    refused(verifier, no_aud, "aud claim")
    wrong_iss = dev_token(SECRET, "acme", "alice", issuer="https://evil.example", audience="keel")
    refused(verifier, wrong_iss, "issuer")
    no_iss = dev_token(SECRET, "acme", "alice", audience="keel")
    refused(verifier, no_iss, "iss claim")


def test_token_for_some_audience_is_refused_when_none_is_configured() -> None:
    token = dev_token(SECRET, "acme", "alice", audience="another-service")
    refused(hs_verifier(), token, "another audience")


def test_garbage_and_oversized_tokens_are_refused() -> None:
    refused(hs_verifier(), "not-a-jwt", "not a valid JWT")
    refused(hs_verifier(), "a.b.c", "not a valid JWT")
    refused(hs_verifier(), "x" * 20_000, "too long")


# -- JWKS ------------------------------------------------------------------------


class JWKSServer:
    """A JWKS endpoint on 127.0.0.1 in a thread; counts how often it is fetched."""

    def __init__(self, keys: list[dict[str, Any]]) -> None:
        self.keys = keys
        self.fetches = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.fetches += 1
                body = json.dumps({"keys": outer.keys}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/.well-known/jwks.json"

    def __enter__(self) -> JWKSServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture
def jwks(rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey) -> Iterator[JWKSServer]:
    rsa_jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key()))
    ec_jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec_key.public_key()))
    rsa_jwk.update(kid="rsa-1", use="sig")
    ec_jwk.update(kid="ec-1", use="sig")
    with JWKSServer([rsa_jwk, ec_jwk]) as server:
        yield server


def jwks_verifier(server: JWKSServer, **config: Any) -> TokenVerifier:
    return TokenVerifier(AuthConfig(mode="jwt", jwks_url=server.url, **config))


def test_rs256_token_verifies_through_jwks(jwks: JWKSServer, rsa_key: rsa.RSAPrivateKey) -> None:
    verifier = jwks_verifier(jwks, audience="keel")
    token = jwt.encode(
        claims(aud="keel", scope="keel:admin"), rsa_key, "RS256", headers={"kid": "rsa-1"}
    )
    principal = verifier.verify(token)
    assert (principal.tenant_id, principal.subject, principal.is_admin) == ("acme", "alice", True)
    verifier.verify(token)
    assert jwks.fetches == 1  # the key set is cached


def test_es256_token_verifies_through_jwks(
    jwks: JWKSServer, ec_key: ec.EllipticCurvePrivateKey
) -> None:
    token = jwt.encode(claims(), ec_key, "ES256", headers={"kid": "ec-1"})
    assert jwks_verifier(jwks).verify(token).tenant_id == "acme"


def test_rs256_token_from_another_key_is_refused(jwks: JWKSServer) -> None:
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = jwt.encode(claims(), stranger, "RS256", headers={"kid": "rsa-1"})
    refused(jwks_verifier(jwks), token, "signature does not verify")


def test_unknown_key_id_is_refused(jwks: JWKSServer, rsa_key: rsa.RSAPrivateKey) -> None:
    token = jwt.encode(claims(), rsa_key, "RS256", headers={"kid": "rotated-away"})
    refused(jwks_verifier(jwks), token, "No key")


def test_hs256_token_signed_with_the_public_key_is_refused(
    jwks: JWKSServer, rsa_key: rsa.RSAPrivateKey
) -> None:
    """Algorithm confusion: the attacker HMACs with the (public) RSA key."""
    public_pem = rsa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}).encode())
    payload = b64url(json.dumps(claims(scope="keel:admin")).encode())
    signature = hmac.new(public_pem, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    token = f"{header}.{payload}.{b64url(signature)}"
    refused(jwks_verifier(jwks), token, "algorithm")
    assert jwks.fetches == 0  # refused before any key lookup


def test_token_claiming_another_algorithm_than_its_key_is_refused(
    jwks: JWKSServer, ec_key: ec.EllipticCurvePrivateKey
) -> None:
    token = jwt.encode(claims(), ec_key, "ES256", headers={"kid": "rsa-1"})
    refused(jwks_verifier(jwks), token, "algorithm")


def test_alg_none_is_refused_by_the_jwks_verifier(jwks: JWKSServer) -> None:
    header = b64url(json.dumps({"alg": "none", "kid": "rsa-1"}).encode())
    payload = b64url(json.dumps(claims()).encode())
    refused(jwks_verifier(jwks), f"{header}.{payload}.", "algorithm")


def test_unreachable_jwks_says_retry(rsa_key: rsa.RSAPrivateKey) -> None:
    with JWKSServer([]) as server:
        url = server.url
    verifier = TokenVerifier(AuthConfig(mode="jwt", jwks_url=url))
    token = jwt.encode(claims(), rsa_key, "RS256", headers={"kid": "rsa-1"})
    with pytest.raises(KeySetUnavailable, match="try again") as info:
        verifier.verify(token)
    assert_no_token_leak(info.value, token)


# -- configuration -------------------------------------------------------------


def test_jwt_mode_needs_exactly_one_key_source() -> None:
    with pytest.raises(ValidationError, match="needs an HS256 secret or a JWKS URL"):
        AuthConfig(mode="jwt")
    with pytest.raises(ValidationError, match="not both"):
        AuthConfig(mode="jwt", hs256_secret=SecretStr(SECRET), jwks_url="https://idp/jwks")


def test_short_secret_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValidationError, match="at least 32") as info:
        AuthConfig(mode="jwt", hs256_secret=SecretStr("short-secret"))
    assert "short-secret" not in str(info.value)


def test_off_mode_needs_nothing_and_has_no_verifier() -> None:
    config = AuthConfig(mode="off")
    with pytest.raises(ValueError, match="jwt mode"):
        TokenVerifier(config)


# -- the Authorization header --------------------------------------------------


def test_bearer_header_is_verified() -> None:
    token = dev_token(SECRET, "acme", "alice")
    principal = principal_from_request(f"Bearer {token}", hs_verifier(), "jwt")
    assert principal.tenant_id == "acme"
    assert principal_from_request(f"bearer  {token} ", hs_verifier(), "jwt").subject == "alice"


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (None, "needs a bearer token"),
        ("", "needs a bearer token"),
        ("   ", "needs a bearer token"),
        ("Bearer", "exactly one token"),
        ("Bearer ", "exactly one token"),
        ("Bearer first-token second-token", "exactly one token"),
        ("Basic x", "Bearer scheme"),
        ("Basic dXNlcjpwYXNz", "Bearer scheme"),
    ],
)
def test_missing_or_malformed_header_is_refused(header: str | None, match: str) -> None:
    with pytest.raises(AuthError, match=match) as info:
        principal_from_request(header, hs_verifier(), "jwt")
    if header and header.split()[1:]:
        assert header.split()[-1] not in str(info.value)


def test_bad_token_in_header_is_not_echoed() -> None:
    token = dev_token("another-secret-that-is-also-long-enough!!", "acme", "alice")
    with pytest.raises(AuthError) as info:
        principal_from_request(f"Bearer {token}", hs_verifier(), "jwt")
    assert_no_token_leak(info.value, token)


def test_off_mode_is_a_local_admin_whatever_the_header() -> None:
    for header in (None, "Basic x", "Bearer whatever"):
        principal = principal_from_request(header, None, "off")
        assert principal == Principal(
            tenant_id="default", subject="local", roles=["admin"], scopes=["keel:admin"]
        )
        assert principal.is_admin


def test_jwt_mode_without_a_verifier_is_a_server_bug() -> None:
    with pytest.raises(RuntimeError):
        principal_from_request("Bearer x", None, "jwt")
