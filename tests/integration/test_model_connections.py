"""The worker's connections to the model's endpoint: an idle one is let go before the
endpoint would close it, so no call goes out on a connection the server is closing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from keel.worker.config.settings import Settings, settings_from
from keel.worker.runtime import anthropic_provider, openai_client
from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn

KEEPALIVE_S = 0.5
Ask = Callable[[], Awaitable[str]]


def openai_asker(settings: Settings) -> tuple[Ask, Callable[[], Awaitable[None]]]:
    client = openai_client(settings)

    async def ask() -> str:
        reply = await client.chat.completions.create(
            model=settings.model, messages=[{"role": "user", "content": "Hello."}]
        )
        return reply.choices[0].message.content or ""

    return ask, client.close


def anthropic_asker(settings: Settings) -> tuple[Ask, Callable[[], Awaitable[None]]]:
    adapter = anthropic_provider(settings)
    assert adapter is not None

    async def ask() -> str:
        text, _ = await adapter.summarise(
            "claude-scripted", [{"role": "user", "content": "Hello."}]
        )
        return text

    return ask, adapter.close


@pytest.mark.parametrize("asker", [openai_asker, anthropic_asker], ids=["openai", "anthropic"])
async def test_an_idle_connection_is_reused_within_the_keepalive_and_let_go_after(
    asker: Callable[[Settings], tuple[Ask, Callable[[], Awaitable[None]]]],
) -> None:
    with ScriptedLLMServer(Script(turns=[Turn(content="Hi.")] * 3)) as llm:
        settings = settings_from(
            openai_base_url=llm.base_url,
            openai_api_key="test-key",
            anthropic_api_key="test-key",
            anthropic_base_url=llm.base_url.removesuffix("/v1"),
            llm_keepalive_s=KEEPALIVE_S,
        )
        ask, close = asker(settings)
        try:
            assert await ask() == "Hi."
            assert await ask() == "Hi."  # at once: the same connection
            await asyncio.sleep(KEEPALIVE_S * 2)
            assert await ask() == "Hi."  # idle past the keep-alive: a new one
        finally:
            await close()
        first, again, later = llm.client_ports
    assert again == first
    assert later != first


def test_the_default_keepalive_is_below_uvicorns() -> None:
    """uvicorn (and so vLLM) closes an idle connection after 5 s."""
    assert settings_from().llm_keepalive_s < 5
