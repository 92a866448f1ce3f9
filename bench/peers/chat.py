"""One chat completions call with the `bump` tool, as the hand-written loops make it."""

from __future__ import annotations

from typing import Any

import openai

from bench.peers.agent import BUMP_TOOL, MODEL

Message = dict[str, Any]
"""A chat completions message as it goes over the wire."""


async def chat(llm: openai.AsyncOpenAI, messages: list[Message]) -> Message:
    """The model's next message: its text and its tool calls."""
    completion = await llm.chat.completions.create(
        model=MODEL,
        messages=messages,  # type: ignore[arg-type]
        tools=[BUMP_TOOL],  # type: ignore[list-item]
    )
    message = completion.choices[0].message
    reply: Message = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        reply["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for call in message.tool_calls
            if call.type == "function"
        ]
    return reply


def opening(prompt: str, instructions: str) -> list[Message]:
    return [{"role": "system", "content": instructions}, {"role": "user", "content": prompt}]


def tool_message(call_id: str, result: int) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": str(result)}
