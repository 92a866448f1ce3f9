"""The exchange's pieces without a server: issued tokens, provider configs, claim mapping."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import SecretStr, ValidationError

from keel.activities.store.orphan_tenant import ORPHAN_TENANT
from keel.api.identity.auth import (
    AuthConfig,
    AuthError,
    KeySetUnavailable,
    Principal,
    TokenVerifier,
    dev_token,
)
from keel.api.identity.exchange import ExchangeRefused, IdentityProviders, granted_scopes
from keel.api.identity.issued_tokens import ISSUED_KID, issue_token, issuing_key
from keel.worker.config.identity_providers import IdentityProvider

SECRET = SecretStr("server-secret-that-is-long-enough-0123456789")
ADA = Principal(tenant_id="acme", subject="ada", roles=["eng"], scopes=["keel:runs"])


def test_an_issued_token_verifies_in_hs256_mode_and_in_jwks_mode() -> None:
    token = issue_token(issuing_key(SECRET), ADA, ttl_s=300, provider="corp")
    hs = TokenVerifier(AuthConfig(hs256_secret=SECRET, issued_secret=SECRET))
    assert hs.verify(token) == ADA
    # With a JWKS configured, Keel's own token is checked with its own key: no fetch (the
    # key set's URL answers nothing here).
    jwks = TokenVerifier(AuthConfig(jwks_url="http://127.0.0.1:9/jwks.json", issued_secret=SECRET))
    assert jwks.verify(token) == ADA


def test_an_issued_token_is_refused_where_its_key_is_unknown_or_it_is_forged() -> None:
    token = issue_token(issuing_key(SECRET), ADA, ttl_s=300, provider="corp")
    other = SecretStr("another-server-secret-long-enough-0123456789")
    with pytest.raises(AuthError, match="signature"):
        TokenVerifier(AuthConfig(hs256_secret=other, issued_secret=other)).verify(token)
    # Signed with the server secret itself (not the derived key) but naming the key id.
    now = int(time.time())
    forged = jwt.encode(
        {"iss": "keel", "tenant_id": "acme", "sub": "x", "exp": now + 60},
        SECRET.get_secret_value(),
        algorithm="HS256",
        headers={"kid": ISSUED_KID},
    )
    with pytest.raises(AuthError, match="signature"):
        TokenVerifier(AuthConfig(hs256_secret=SECRET, issued_secret=SECRET)).verify(forged)
    expired = issue_token(issuing_key(SECRET), ADA, ttl_s=-600, provider="corp")
    with pytest.raises(AuthError, match="expired"):
        TokenVerifier(AuthConfig(hs256_secret=SECRET, issued_secret=SECRET)).verify(expired)


def test_no_token_may_name_the_orphan_tenant() -> None:
    verifier = TokenVerifier(AuthConfig(hs256_secret=SECRET))
    with pytest.raises(AuthError, match="reserved"):
        verifier.verify(dev_token(SECRET, ORPHAN_TENANT, "eve", scopes=["keel:admin"]))


def provider(**overrides: Any) -> dict[str, Any]:
    return {
        "name": "corp",
        "issuer": "https://idp.test",
        "audience": "keel",
        "jwks_url": "https://idp.test/jwks",
        "tenant": "acme",
        **overrides,
    }


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"hs256_secret": "s" * 40}, "exactly one of jwks_url"),
        ({"tenant_claim": "org"}, "exactly one of tenant"),
        ({"jwks_url": None, "public_key_pem": "pem"}, "OIDC provider"),
        ({"algorithms": ["RS256", "HS256"]}, "HS256 is only for a gateway"),
        ({"jwks_url": "ftp://idp.test/jwks"}, "must start with https"),
        (
            {"kind": "gateway", "jwks_url": None, "hs256_secret": "s" * 40},
            "alone",
        ),
        (
            {
                "kind": "gateway",
                "jwks_url": None,
                "hs256_secret": "short",
                "algorithms": ["HS256"],
            },
            "at least 32 bytes",
        ),
    ],
)
def test_a_provider_config_that_could_be_abused_is_refused(
    overrides: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValidationError, match=words):
        IdentityProvider.model_validate(provider(**overrides))


def test_scopes_come_only_from_the_mapping() -> None:
    corp = IdentityProvider.model_validate(
        provider(scopes_by_role={"*": ["keel:runs"], "auditors": ["keel:admin"]})
    )
    assert granted_scopes(corp, []) == ["keel:runs"]
    assert granted_scopes(corp, ["admin", "keel:admin"]) == ["keel:runs"]
    assert granted_scopes(corp, ["auditors"]) == ["keel:runs", "keel:admin"]


def _pem_gateway() -> tuple[rsa.RSAPrivateKey, IdentityProvider]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    gateway = IdentityProvider.model_validate(
        provider(
            kind="gateway",
            jwks_url=None,
            public_key_pem=pem,
            tenant=None,
            tenant_claim="realm.tenant",
            roles_claim="realm.roles",
            scopes_by_role={"ops": ["keel:runs"]},
        )
    )
    return key, gateway


def test_a_gateway_assertion_maps_nested_claims_to_tenant_roles_and_scopes() -> None:
    key, gateway = _pem_gateway()
    providers = IdentityProviders([gateway])
    now = int(time.time())
    claims = {
        "iss": "https://idp.test",
        "aud": "keel",
        "sub": "svc",
        "exp": now + 60,
        "realm": {"tenant": "beta", "roles": ["ops"]},
    }
    who = providers.verify(jwt.encode(claims, key, algorithm="RS256")).principal
    assert (who.tenant_id, who.subject, who.roles, who.scopes) == (
        "beta",
        "svc",
        ["ops"],
        ["keel:runs"],
    )
    # The same claims signed by anyone else, or with `alg: none`, are refused.
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(ExchangeRefused, match="signature") as refused:
        providers.verify(jwt.encode(claims, stranger, algorithm="RS256"))
    assert refused.value.provider == "corp" and refused.value.claimed_tenant == "beta"
    with pytest.raises(ExchangeRefused, match="algorithm"):
        providers.verify(jwt.encode(claims, None, algorithm="none"))
    missing = {k: v for k, v in claims.items() if k != "realm"}
    with pytest.raises(ExchangeRefused, match=r"realm\.tenant"):
        providers.verify(jwt.encode(missing, key, algorithm="RS256"))


def test_two_providers_may_not_share_an_issuer() -> None:
    corp = IdentityProvider.model_validate(provider())
    with pytest.raises(ValueError, match="issuer"):
        IdentityProviders([corp, corp.model_copy(update={"name": "corp2"})])


def test_a_key_set_that_cannot_be_fetched_is_unavailable_not_a_refusal() -> None:
    corp = IdentityProvider.model_validate(provider(jwks_url="http://127.0.0.1:9/jwks"))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = {"iss": "https://idp.test", "aud": "keel", "sub": "ada", "exp": 4_102_444_800}
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})
    with pytest.raises(KeySetUnavailable, match="try again"):
        IdentityProviders([corp]).verify(token)
