"""The token exchange against a scripted identity provider (a JWKS served on loopback).

A provider's token is traded for a Keel token that the API then accepts on
GET /v1/runs; scopes come only from the provider's mapping; expired, wrong-audience,
wrong-issuer and reserved-tenant tokens are refused with a sentence and audited under
the orphan tenant before the 401, which only admins can read.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest

from keel.activities.store.orphan_tenant import ORPHAN_TENANT
from keel.worker.scripted.llm import Script, Turn
from tests.conftest import auth_headers
from tests.integration.conftest import LaunchKeel
from tests.integration.scripted_idp import ScriptedIdentityProvider

EXCHANGE = "/v1/auth/exchange"
AUDIENCE = "keel-api"
ADMIN = auth_headers("default", "root", "keel:admin")
UNUSED = Script(turns=[Turn(content="unused")])


@pytest.fixture
def idp() -> Iterator[ScriptedIdentityProvider]:
    with ScriptedIdentityProvider(f"https://idp-{uuid.uuid4().hex[:6]}.test").serving() as p:
        yield p


def provider_config(idp: ScriptedIdentityProvider, **overrides: Any) -> dict[str, Any]:
    return {
        "name": "corp",
        "kind": "oidc",
        "issuer": idp.issuer,
        "audience": AUDIENCE,
        "jwks_url": idp.jwks_url,
        "tenant_claim": "org",
        "roles_claim": "groups",
        "scopes_by_role": {"*": ["keel:runs"], "auditors": ["keel:admin"]},
        **overrides,
    }


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def orphan_rows(http: httpx.AsyncClient, after_id: int) -> list[dict[str, Any]]:
    params = {"tenant": ORPHAN_TENANT, "after_id": after_id, "limit": 1000}
    answer = await http.get("/v1/admin/audit", headers=ADMIN, params=params)
    assert answer.status_code == 200, answer.text
    rows: list[dict[str, Any]] = answer.json()
    return rows


async def last_audit_id(http: httpx.AsyncClient) -> int:
    newest = 0
    while True:
        params = {"after_id": newest, "limit": 1000}
        page = (await http.get("/v1/admin/audit", headers=ADMIN, params=params)).json()
        if not page:
            return newest
        newest = page[-1]["id"]


async def test_a_providers_token_is_exchanged_and_the_keel_token_is_accepted(
    idp: ScriptedIdentityProvider, keel_app: LaunchKeel
) -> None:
    tenant = f"org-{uuid.uuid4().hex[:6]}"
    providers = [provider_config(idp)]
    async with keel_app(UNUSED, headers={}, worker=False, identity_providers=providers) as http:
        # The provider's token claims keel:admin itself and a role the mapping ignores:
        # neither reaches the Keel token.
        id_token = idp.token(
            AUDIENCE, sub="ada", org=tenant, groups=["engineers"], scope="keel:admin"
        )
        answer = await http.post(
            EXCHANGE,
            data={
                "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                "subject_token": id_token,
                "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
            },
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["cache-control"] == "no-store"
        issued = answer.json()
        assert issued["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
        assert issued["token_type"] == "Bearer"
        assert issued["expires_in"] == 900  # the short default, KEEL_EXCHANGE_TTL_S
        assert issued["scope"] == "keel:runs"
        assert (issued["tenant_id"], issued["subject"]) == (tenant, "ada")
        keel_token = issued["access_token"]
        assert keel_token != id_token

        runs = await http.get("/v1/runs", headers=bearer(keel_token))
        assert runs.status_code == 200, runs.text
        assert runs.json()["runs"] == []  # a tenant of its own: nobody else's runs
        refused = await http.get("/v1/admin/audit", headers=bearer(keel_token))
        assert refused.status_code == 403  # no keel:admin: the mapping does not grant it

        # The provider's raw token is not a Keel token.
        assert (await http.get("/v1/runs", headers=bearer(id_token))).status_code == 401

        # A role the mapping grants keel:admin to does get it (as JSON this time); asking
        # for fewer scopes narrows the grant, asking for more never widens it.
        auditor = idp.token(AUDIENCE, sub="grace", org=tenant, groups=["auditors"])
        admin = await http.post(EXCHANGE, json={"subject_token": auditor})
        assert admin.json()["scope"] == "keel:runs keel:admin"
        reads = await http.get(
            "/v1/admin/audit",
            headers=bearer(admin.json()["access_token"]),
            params={"tenant": tenant},
        )
        assert reads.status_code == 200
        exchanged = [r for r in reads.json() if r["action"] == "token.exchanged"]
        who = [(r["actor"], r["subject"]) for r in exchanged]
        assert who == [("ada", "corp"), ("grace", "corp")]
        assert exchanged[0]["detail"]["scopes"] == ["keel:runs"]
        narrowed = await http.post(
            EXCHANGE, json={"subject_token": auditor, "scope": "keel:runs keel:superuser"}
        )
        assert narrowed.json()["scope"] == "keel:runs"
        assert idp.fetches >= 1  # verified against the key set it served


async def test_a_gateways_signed_assertion_is_exchanged(keel_app: LaunchKeel) -> None:
    secret = "gateway-secret-0123456789abcdef0123456789"
    gateway = {
        "name": "edge",
        "kind": "gateway",
        "issuer": "https://gateway.internal",
        "audience": AUDIENCE,
        "hs256_secret": secret,
        "algorithms": ["HS256"],
        "tenant": "gateway-tenant",
        "scopes_by_role": {"*": ["keel:runs"]},
    }
    async with keel_app(UNUSED, headers={}, worker=False, identity_providers=[gateway]) as http:
        claims = {"iss": "https://gateway.internal", "aud": AUDIENCE, "sub": "svc-7"}
        assertion = jwt.encode({**claims, "exp": 4_102_444_800}, secret, algorithm="HS256")
        answer = await http.post(EXCHANGE, json={"subject_token": assertion})
        assert answer.status_code == 200, answer.text
        assert answer.json()["tenant_id"] == "gateway-tenant"
        token = answer.json()["access_token"]
        assert (await http.get("/v1/runs", headers=bearer(token))).status_code == 200
        forged = jwt.encode({**claims, "exp": 4_102_444_800}, "x" * 40, algorithm="HS256")
        assert (await http.post(EXCHANGE, json={"subject_token": forged})).status_code == 401


async def test_bad_tokens_are_refused_with_a_sentence_and_audited_under_the_orphan_tenant(
    idp: ScriptedIdentityProvider, keel_app: LaunchKeel
) -> None:
    tenant = f"org-{uuid.uuid4().hex[:6]}"
    stranger = ScriptedIdentityProvider("https://stranger.test")
    providers = [provider_config(idp)]
    async with keel_app(UNUSED, headers={}, worker=False, identity_providers=providers) as http:
        before = await last_audit_id(http)
        cases = {
            "expired": (idp.token(AUDIENCE, ttl_s=-600, sub="ada", org=tenant), "expired"),
            "audience": (idp.token("another-api", sub="ada", org=tenant), "audience"),
            "issuer": (stranger.token(AUDIENCE, sub="ada", org=tenant), "issuer"),
            "orphan": (idp.token(AUDIENCE, sub="ada", org=ORPHAN_TENANT), "reserved"),
        }
        for token, word in cases.values():
            answer = await http.post(EXCHANGE, json={"subject_token": token})
            assert answer.status_code == 401, answer.text
            assert answer.headers["www-authenticate"] == "Bearer"
            sentence = answer.json()["detail"]
            assert isinstance(sentence, str) and word in sentence and sentence.endswith(".")
            assert token not in answer.text
        # Malformed requests are 422s that name the field, not refusals.
        assert (await http.post(EXCHANGE, json={})).status_code == 422
        wrong_grant = {"subject_token": "x", "grant_type": "password"}
        assert (await http.post(EXCHANGE, json=wrong_grant)).status_code == 422

        rows = [r for r in await orphan_rows(http, before) if r["subject"] == EXCHANGE]
        assert len(rows) == len(cases)
        assert all(r["tenant_id"] == ORPHAN_TENANT and r["action"] == "token.refused" for r in rows)
        by_reason = {r["detail"]["reason"]: r for r in rows}
        assert any("expired" in reason for reason in by_reason)
        # The tenant a refused token claimed is a label in the detail, and the provider
        # that refused it is named (none for an issuer nobody configured).
        assert {r["detail"].get("claimed_tenant") for r in rows} <= {tenant, ORPHAN_TENANT, None}
        issuer_row = next(r for reason, r in by_reason.items() if "issuer" in reason)
        assert "provider" not in issuer_row["detail"]
        expired_row = next(r for reason, r in by_reason.items() if "expired" in reason)
        assert expired_row["detail"]["provider"] == "corp"
        assert expired_row["detail"]["claimed_tenant"] == tenant
        assert all(token not in str(rows) for token, _ in cases.values())

        # The orphan tenant's rows are for admins: a tenant's own token cannot read them,
        # nor can a token that names the orphan tenant act as it.
        user = auth_headers(tenant, "ada")
        own = await http.get("/v1/admin/audit", headers=user, params={"tenant": ORPHAN_TENANT})
        assert own.status_code == 403
        posing = auth_headers(ORPHAN_TENANT, "ada", "keel:admin")
        assert (await http.get("/v1/admin/audit", headers=posing)).status_code == 401
        # The chains this test wrote (another test in this database may tamper with its own).
        for written in (ORPHAN_TENANT, tenant):
            verify = "/v1/admin/audit/verify"
            chain = (await http.get(verify, headers=ADMIN, params={"tenant": written})).json()
            assert chain["ok"], chain
