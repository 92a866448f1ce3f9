"""`UserTokens` against a stand-in token endpoint and the real credential table: a
granted refresh token is traded and the token cached; a refused one is forgotten and
the user must be asked again; a token endpoint that fails is a retryable refusal."""

from __future__ import annotations

import uuid

import pytest
from pydantic import SecretStr

from keel.activities.credentials.backends import UserCredentialBackend
from keel.activities.credentials.credential_store import CredentialStore
from keel.activities.credentials.sealing import Sealer
from keel.activities.credentials.user_tokens import (
    CredentialNeeded,
    CredentialRefused,
    SubjectAssertions,
    UserTokens,
)
from keel.activities.store.run_store import Store
from tests.conftest import JWT_SECRET
from tests.integration.user_backend import UserBackend, serving


def tokens_for(store: Store, origin: str, **backend: object) -> UserTokens:
    config = UserCredentialBackend.model_validate({"token_url": f"{origin}/token", **backend})
    return UserTokens(
        {origin: config},
        CredentialStore(store.pool, Sealer({"k": b"\x01" * 32}, "k")),
        SubjectAssertions(SecretStr(JWT_SECRET), "keel"),
    )


async def test_a_granted_refresh_token_is_traded_cached_and_forgotten_once_refused(
    store: Store,
) -> None:
    tenant = f"rt-{uuid.uuid4().hex[:8]}"
    async with serving(UserBackend(expires_in=600)) as backend:
        tokens = tokens_for(store, backend.origin, grant="refresh_token")
        with pytest.raises(CredentialNeeded):
            await tokens.bearer(backend.url, tenant, "user:alice")
        backend.refresh_tokens["rt-alice"] = f"{tenant}/alice"
        await tokens.adopt(backend.url, tenant, "user:alice", "rt-alice")
        first = await tokens.bearer(backend.url, tenant, "user:alice")
        assert backend.issued[first] == f"{tenant}/alice"
        assert await tokens.bearer(backend.url, tenant, "user:alice") == first  # cached
        assert [g["refresh_token"] for g in backend.grants] == ["rt-alice"]

        # Bob's granted token is not alice's.
        with pytest.raises(CredentialNeeded):
            await tokens.bearer(backend.url, tenant, "user:bob")

        # Revoked at the backend: once the access token is due, the user is asked again.
        await tokens.adopt(backend.url, tenant, "user:carol", "rt-revoked")
        with pytest.raises(CredentialNeeded):
            await tokens.bearer(backend.url, tenant, "user:carol")
        with pytest.raises(CredentialNeeded):  # and nothing of it is left to retry with
            await tokens.bearer(backend.url, tenant, "user:carol")
        assert [g["refresh_token"] for g in backend.grants] == ["rt-alice", "rt-revoked"]


async def test_an_unreachable_token_endpoint_is_a_retryable_refusal(store: Store) -> None:
    tokens = tokens_for(store, "http://127.0.0.1:9", grant="token_exchange")
    with pytest.raises(CredentialRefused) as refused:
        await tokens.bearer("http://127.0.0.1:9/mcp", "t", "user:alice")
    assert refused.value.retryable and "could not be reached" in str(refused.value)
