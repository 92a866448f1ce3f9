"""The worker's connections to the model's endpoint: an idle one is let go before the
endpoint would close it, so no call goes out on a connection the server is closing."""

from __future__ import annotations

import asyncio

import openai

from keel.worker.config.settings import settings_from
from keel.worker.runtime import openai_client
from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn

KEEPALIVE_S = 0.5


async def ask(client: openai.AsyncOpenAI, model: str) -> None:
    reply = await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Hello."}]
    )
    assert reply.choices[0].message.content == "Hi."


async def test_an_idle_connection_is_reused_within_the_keepalive_and_let_go_after() -> None:
    with ScriptedLLMServer(Script(turns=[Turn(content="Hi.")] * 3)) as llm:
        settings = settings_from(
            openai_base_url=llm.base_url, openai_api_key="test-key", llm_keepalive_s=KEEPALIVE_S
        )
        client = openai_client(settings)
        try:
            await ask(client, settings.model)
            await ask(client, settings.model)  # at once: the same connection
            await asyncio.sleep(KEEPALIVE_S * 2)
            await ask(client, settings.model)  # idle past the keep-alive: a new one
        finally:
            await client.close()
        first, again, later = llm.client_ports
    assert again == first
    assert later != first


def test_the_default_keepalive_is_below_uvicorns() -> None:
    """uvicorn (and so vLLM) closes an idle connection after 5 s."""
    assert settings_from().llm_keepalive_s < 5
