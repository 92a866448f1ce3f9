"""`UserTokens` against a stand-in token endpoint and the real credential table: a
granted refresh token is traded and the token cached; a refused one is forgotten and
the user must be asked again; a token endpoint that fails is a retryable refusal."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from pydantic import SecretStr
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from keel.activities.a2a.client import A2AClientActivities
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
from keel.workflows.coordinator.models import DelegateInput
from tests.conftest import JWT_SECRET
from tests.integration.user_backend import AUDIENCE, UserBackend, serving
from tests.unit.test_a2a_client_targets import card


def tokens_for(
    store: Store, origin: str, *, prefix: str | None = None, **backend: object
) -> UserTokens:
    """Tokens for the backend at `prefix` (default `origin`), traded at `origin`/token."""
    config = UserCredentialBackend.model_validate({"token_url": f"{origin}/token", **backend})
    return UserTokens(
        {prefix or origin: config},
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


@asynccontextmanager
async def a2a_agent() -> AsyncIterator[tuple[str, list[str]]]:
    """An A2A agent on 127.0.0.1 that serves its card and keeps each request's bearer."""
    bearers: list[str] = []
    base: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            for line in head.split("\r\n"):
                if line.lower().startswith("authorization:"):
                    bearers.append(line.split(":", 1)[1].strip())
            body = card(base[0])
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    base.append(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
    async with server:
        yield base[0], bearers


def delegate(url: str, tenant: str, requester: str) -> DelegateInput:
    return DelegateInput(
        url=url, text="Look.", message_id="coord-1-0", tenant_id=tenant, requester=requester
    )


async def test_an_a2a_agent_called_as_the_user_gets_the_requester_s_token(store: Store) -> None:
    tenant = f"a2a-{uuid.uuid4().hex[:8]}"
    async with serving(UserBackend(expires_in=600)) as backend, a2a_agent() as (url, bearers):
        as_user = tokens_for(
            store, backend.origin, prefix=url, grant="token_exchange", audience=AUDIENCE
        )
        client = A2AClientActivities(lambda *_: "worker-wide", user_tokens=as_user)
        for who in ("alice", "bob"):
            bearers.clear()
            with pytest.raises(ApplicationError):  # the stand-in answers no task
                await ActivityEnvironment().run(
                    client.a2a_send, delegate(url, tenant, f"user:{who}")
                )
            [token] = backend.tokens_of(f"{tenant}/{who}")
            assert bearers and set(bearers) == {f"Bearer {token}"}

        # Without a credential (a backend whose tokens users give), nothing is sent.
        bearers.clear()
        given = tokens_for(store, backend.origin, prefix=url, grant="user_token")
        asking = A2AClientActivities(lambda *_: "worker-wide", user_tokens=given)
        with pytest.raises(ApplicationError) as needed:
            await ActivityEnvironment().run(asking.a2a_send, delegate(url, tenant, "user:carol"))
        assert needed.value.type == "CredentialNeeded" and needed.value.non_retryable
        assert bearers == []
