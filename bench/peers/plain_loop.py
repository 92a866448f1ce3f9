"""The agent as a plain in-process loop: the openai client and `bump`, no Temporal.

.venv/bin/python -m bench.peers.plain_loop --llm-url URL [--steps 20 ...]
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import openai

from bench.peers.agent import API_KEY, INSTRUCTIONS, PROMPT, bump, expected_answer, max_turns
from bench.peers.chat import chat, opening, tool_message
from bench.peers.measure import Peer, PeerArgs, PeerError, WorkflowRef, check_answer, serve


async def converse(llm: openai.AsyncOpenAI, turns: int) -> str:
    """Call the model, run its `bump` calls, send the results back, until it answers."""
    messages = opening(PROMPT, INSTRUCTIONS)
    for _ in range(turns):
        reply = await chat(llm, messages)
        messages.append(reply)
        calls = reply.get("tool_calls") or []
        if not calls:
            return str(reply["content"] or "")
        for call in calls:
            n = json.loads(call["function"]["arguments"])["n"]
            messages.append(tool_message(call["id"], bump(n)))
    raise PeerError(f"The model did not answer within {turns} turns.")


@asynccontextmanager
async def plain_peer(args: PeerArgs) -> AsyncIterator[Peer]:
    llm = openai.AsyncOpenAI(base_url=args.llm_url, api_key=API_KEY, max_retries=0)

    async def run_once() -> WorkflowRef | None:
        check_answer(await converse(llm, max_turns(args.steps)), expected_answer(args.steps))
        return None

    try:
        yield Peer(run_once=run_once, client=None)
    finally:
        await llm.close()


if __name__ == "__main__":
    serve("bench.peers.plain_loop", plain_peer)
