"""A chat completion as it streams: its chunks read to the end, assembled into one
message, and its text published meanwhile as live `message_delta` notices."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from temporalio.exceptions import ApplicationError

from keel.activities.llm.genai_spans import note_response_model
from keel.activities.store.run_store import Store
from keel.workflows.error_types import LLM_UNAVAILABLE
from keel.workflows.usage.models import Usage

# Live token deltas: NOTIFYs on the durable events' channel, batched so a long
# completion sends a few notices a second rather than one a token.
EVENTS_CHANNEL = "keel_events"
DELTA_FLUSH_EVERY_S = 0.05
# At most 6 bytes a character once JSON-escaped: far below NOTIFY's 8000-byte limit.
DELTA_MAX_CHARS = 512
DELTA_DRAIN_S = 1.0
# How long the end of a reply's body is waited for after `[DONE]`.
STREAM_END_WAIT_S = 1.0

log = logging.getLogger("keel.llm")


class DeltaPublisher:
    """Publishes streamed text as live `message_delta` notices; never fails the LLM call."""

    def __init__(self, store: Store, run_id: str, step: int, attempt: int) -> None:
        self._store = store
        self._head = {"type": "message_delta", "run_id": run_id, "step": step, "attempt": attempt}
        self._pending: list[str] = []
        self._pending_chars = 0
        self._index = 0
        self._full = asyncio.Event()
        self._closing = False
        self._warned = False
        self._task: asyncio.Task[None] | None = None

    def add(self, text: str) -> None:
        self._pending.append(text)
        self._pending_chars += len(text)
        if self._task is None:
            # Started by the first text: a reply of tool calls alone costs no task. The
            # first text goes out at once (the reader sees the reply begin), then batches.
            self._task = asyncio.create_task(self._pump())
            self._full.set()
        if self._pending_chars >= DELTA_MAX_CHARS:
            self._full.set()

    async def __aenter__(self) -> DeltaPublisher:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if self._task is None:
            return  # no text came: nothing to send
        if exc_type is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            return
        self._closing = True
        self._full.set()
        try:
            # The last deltas go out before the durable `message` event is written.
            await asyncio.wait_for(self._task, DELTA_DRAIN_S)
        except TimeoutError:
            log.warning("message_delta: gave up sending the last deltas of %s", self._head)

    async def _pump(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._full.wait(), DELTA_FLUSH_EVERY_S)
            except TimeoutError:
                pass
            self._full.clear()
            closing = self._closing
            await self._flush()
            if closing:
                return

    async def _flush(self) -> None:
        text = "".join(self._pending)
        self._pending.clear()
        self._pending_chars = 0
        for start in range(0, len(text), DELTA_MAX_CHARS):
            payload = {
                **self._head,
                "delta_index": self._index,
                "delta": text[start : start + DELTA_MAX_CHARS],
            }
            self._index += 1
            try:
                await self._store.notify(EVENTS_CHANNEL, json.dumps(payload, ensure_ascii=False))
            except Exception as exc:  # live deltas are best effort; the message is stored anyway
                if not self._warned:
                    log.warning("message_delta: cannot notify for %s: %s", self._head, exc)
                    self._warned = True


async def stream_chunks(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """The JSON chunks of a chat completion stream, until `[DONE]`."""
    async for line in lines:
        if not line.startswith("data:"):
            continue  # blank separators, comments, `event:` lines
        data = line[5:].strip()
        if data == "[DONE]":
            # Read the body to its end (the server ends it here), so the connection goes
            # back to the client's pool: one left unread is closed, and the next call
            # would connect anew. A server that keeps it open is not waited for long.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STREAM_END_WAIT_S):
                    async for _ in lines:
                        pass
            return
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise ApplicationError(
                f"LLM provider sent a malformed stream chunk: {data[:200]}", type=LLM_UNAVAILABLE
            ) from exc
        if not isinstance(chunk, dict):
            continue
        if chunk.get("error"):
            error = chunk["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise ApplicationError(
                f"LLM provider failed mid-stream: {str(message)[:300]}", type=LLM_UNAVAILABLE
            )
        yield chunk


async def collect_stream(
    chunks: AsyncIterator[dict[str, Any]], on_text: Callable[[str], None] | None = None
) -> tuple[dict[str, Any], Usage, str]:
    """Assemble a streamed completion into one message; `on_text` sees each text delta."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage = Usage()
    finish_reason = "stop"
    response_model: str | None = None
    async for chunk in chunks:
        response_model = response_model or chunk.get("model")
        reported = chunk.get("usage")
        if reported:
            usage = Usage(
                prompt_tokens=reported.get("prompt_tokens") or 0,
                completion_tokens=reported.get("completion_tokens") or 0,
            )
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text:
                content.append(text)
                if on_text is not None:
                    on_text(text)
            for part in delta.get("tool_calls") or ():
                call = calls.setdefault(
                    part.get("index", 0),
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if part.get("id"):
                    call["id"] = part["id"]
                function = part.get("function") or {}
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                finish_reason = choice["finish_reason"]
    if response_model:
        note_response_model(response_model)
    ordered = [calls[i] for i in sorted(calls)]
    for i, call in enumerate(ordered):
        call["id"] = call["id"] or f"call_{i}"
    return {"content": "".join(content), "tool_calls": ordered}, usage, finish_reason
