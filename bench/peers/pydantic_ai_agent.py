"""The Pydantic AI agent with `bump`, made durable by its `TemporalDurability` capability.

Workflow code imports this module passed through Temporal's sandbox, so the
workflow and the worker's activities share one agent per LLM URL, built once
on the host, instead of one per workflow run.
"""

from __future__ import annotations

import functools

import openai
from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from bench.peers.agent import API_KEY, INSTRUCTIONS, MODEL
from bench.peers.agent import bump as add_one

AGENT_NAME = "bumper"


# The function's name is the tool's name the model sees.
async def bump(n: int) -> int:
    """Return n + 1."""
    return add_one(n)


@functools.cache
def bump_agent(llm_url: str) -> Agent[None, str]:
    """The agent on the chat completions model at `llm_url`, with `max_retries=0`."""
    llm = openai.AsyncOpenAI(base_url=llm_url, api_key=API_KEY, max_retries=0)
    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=llm))
    return Agent(
        model,
        name=AGENT_NAME,
        instructions=INSTRUCTIONS,
        tools=[bump],
        capabilities=[TemporalDurability()],
    )
