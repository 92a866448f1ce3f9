"""The coordinator's A2A calls go only where webhooks may: the agent's URL and every URL
its card names are checked before anything is sent, Keel's own API excepted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from keel.activities.a2a.client import A2AClientActivities
from keel.activities.outbound.targets import WebhookTargetPolicy
from keel.workflows.coordinator.models import DelegateInput


def card(rpc_url: str) -> bytes:
    return json.dumps(
        {
            "name": "Elsewhere",
            "description": "An agent whose card points somewhere else.",
            "version": "1",
            "supportedInterfaces": [
                {"url": rpc_url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [],
        }
    ).encode()


@asynccontextmanager
async def agent(rpc_url: str | None = None) -> AsyncIterator[tuple[str, list[str]]]:
    """An agent on 127.0.0.1 that serves its card (naming `rpc_url`, default itself) and
    keeps the request lines it was sent."""
    seen: list[str] = []
    base: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            seen.append(head.split("\r\n", 1)[0])
            body = card(rpc_url or base[0])
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
        yield base[0], seen


def send(url: str) -> DelegateInput:
    return DelegateInput(
        url=url, text="Review it.", message_id="coord-1-0", tenant_id="acme", requester="user:a"
    )


async def test_a_card_that_points_at_a_blocked_address_gets_no_task() -> None:
    async with agent("http://169.254.169.254/latest/a2a?token=abc") as (url, seen):
        client = A2AClientActivities(lambda *_: None)  # loopback allowed, as by default
        with pytest.raises(ApplicationError) as caught:
            await ActivityEnvironment().run(client.a2a_send, send(url))
    assert caught.value.non_retryable and caught.value.type == "A2ATargetRefused"
    said = str(caught.value)
    assert "A2A agent host 169.254.169.254 resolves to 169.254.169.254" in said
    assert "token=abc" not in said
    assert seen and all(line.startswith("GET /.well-known/agent-card.json") for line in seen)


async def test_an_agent_url_the_policy_refuses_is_not_called_but_keels_own_api_is() -> None:
    async with agent() as (url, seen):
        public = WebhookTargetPolicy(targets="public")
        refusing = A2AClientActivities(lambda *_: None, targets=public)
        with pytest.raises(ApplicationError) as caught:
            await ActivityEnvironment().run(refusing.a2a_send, send(url))
        assert caught.value.type == "A2ATargetRefused" and seen == []
        assert "this machine's own (loopback)" in str(caught.value)

        # Keel's own API is exempt: the card is fetched and the task posted to it.
        own = A2AClientActivities(lambda *_: None, targets=public, keel_urls=[url])
        with pytest.raises(ApplicationError) as answered:
            await ActivityEnvironment().run(own.a2a_send, send(url))
        assert answered.value.type != "A2ATargetRefused"
    assert any(line.startswith("POST ") for line in seen), seen
