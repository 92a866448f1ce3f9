"""The scripted model behind the conformance agent, and how it learns each message's id.

The A2A compatibility kit (a2a-tck) says what it expects of an agent through the
`messageId` of the message it sends (`tck-complete-task-…`, `tck-input-required-…`,
`test-resubscribe-message-id-…`); the text is often the same for different scenarios.
A model only sees text, so `MessageIdBook` (an ASGI middleware in front of Keel's API,
part of this fixture only) notes which `messageId` came with which text, and
`ConformanceModel` looks the text up to choose its reply. The kit sends one message at a
time, so the latest message with a given text is the one being answered. The 0.3 kit
has no scenarios; for its messages the agent asks for more input, so the tasks it
starts stay open for the cancels and follow-ups it sends next.

Nothing here is in Keel's protocol code: Keel sees ordinary A2A messages and an
ordinary agent whose model happens to be scripted.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.worker.scripted.openai_wire import Reply

__all__ = ["ConformanceModel", "MessageIdBook", "MessageIdRecorder", "reply_for"]

MODEL_NAME = "conformance"
ANSWER_PREFIX = "The user answered: "
# Longest prefixes first: `tck-artifact-file-url` before `tck-artifact-file`.
FINAL_TEXT: dict[str, str] = {
    "tck-complete-task": "Hello from TCK",
    "tck-artifact-text": "Generated text content",
    "tck-message-response": "Direct message response",
    "tck-stream-ordering-001": "Ordered output",
    "tck-stream-artifact-text": "Streamed text content",
    "tck-stream-001": "Stream hello from TCK",
    "tck-stream-003": "Stream task lifecycle",
}
ASKS_FOR_INPUT = ("tck-input-required",)
# Ids of the 1.0 kit's scenarios. The 0.3 kit has no scenarios: it cancels, continues
# and reads back the tasks it starts, so for its messages the agent keeps asking.
SCENARIO_IDS = ("tck-", "test-resubscribe-message-id")
# The kit resubscribes to this task while it works, so it must stay `working` a while.
SLOW: dict[str, float] = {"test-resubscribe-message-id": 6.0}


@dataclass
class _Entry:
    text: str
    message_id: str


class MessageIdBook:
    """Which `messageId` came with which text, newest last; safe across threads."""

    def __init__(self, keep: int = 2000) -> None:
        self._entries: list[_Entry] = []
        self._keep = keep
        self._lock = threading.Lock()

    def note_request(self, body: bytes) -> None:
        """Note the message of a JSON-RPC request body (a batch notes each), or of an
        HTTP+JSON one (`{"message": ...}` at the top)."""
        try:
            data = json.loads(body)
        except ValueError:
            return
        for call in data if isinstance(data, list) else [data]:
            rest = isinstance(call, dict) and "message" in call and "method" not in call
            params = call if rest else call.get("params") if isinstance(call, dict) else None
            message = params.get("message") if isinstance(params, dict) else None
            if not isinstance(message, dict) or not isinstance(message.get("messageId"), str):
                continue
            parts = message.get("parts") or message.get("content") or []
            texts = [
                p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
            ]
            self.note("\n".join(texts), message["messageId"])

    def note(self, text: str, message_id: str) -> None:
        with self._lock:
            self._entries.append(_Entry(text.strip(), message_id))
            del self._entries[: -self._keep]

    def message_id_for(self, text: str) -> str:
        """The id of the newest message whose text this is ('' when none matches)."""
        text = text.strip()
        with self._lock:
            for entry in reversed(self._entries):
                if entry.text == text:
                    return entry.message_id
        return ""


class MessageIdRecorder:
    """ASGI middleware: notes A2A request bodies in a `MessageIdBook`, then passes them on."""

    def __init__(self, app: ASGIApp, book: MessageIdBook) -> None:
        self.app = app
        self.book = book

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        self.book.note_request(body)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def reply_for(messages: list[dict[str, Any]], book: MessageIdBook) -> Turn:
    """The scripted reply to a chat request, from the message it answers."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    tail = messages[last_user + 1 :]
    answers = [m for m in tail if m.get("role") == "tool"]
    if answers:
        content = _text(answers[-1].get("content"))
        key = content.removeprefix(ANSWER_PREFIX)
    else:
        key = _text(messages[last_user].get("content")) if last_user >= 0 else ""
    message_id = book.message_id_for(key)
    waits = message_id.startswith(ASKS_FOR_INPUT) or not message_id.startswith(SCENARIO_IDS)
    if message_id and waits:
        # A new question each time: an identical one would be answered from memory.
        question = f"TCK input required ({len(answers) + 1})."
        return Turn(
            tool_calls=[ScriptedToolCall(name="ask_user", arguments={"question": question})]
        )
    delay = next((s for p, s in SLOW.items() if message_id.startswith(p)), 0.0)
    text = next(
        (t for p, t in FINAL_TEXT.items() if message_id.startswith(p)),
        f"Unhandled messageId prefix: {message_id or '(unknown)'}",
    )
    return Turn(content=text, delay_s=delay)


class ConformanceModel(ScriptedLLMServer):
    """An OpenAI-compatible model whose every reply follows `reply_for`."""

    def __init__(self, book: MessageIdBook, host: str = "127.0.0.1", port: int = 0) -> None:
        placeholder = Script(name=MODEL_NAME, turns=[Turn(content="unused")])
        super().__init__(placeholder, host=host, port=port)
        self.book = book

    async def _chat_completions(self, request: Request) -> Response:
        body = await request.json()
        messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
        turn = reply_for(messages, self.book)
        if turn.delay_s:
            await asyncio.sleep(turn.delay_s)
        index = sum(1 for m in messages if m.get("role") == "assistant")
        reply = Reply(turn=turn, index=index, content=turn.content, model=MODEL_NAME)
        if body.get("stream"):
            return StreamingResponse(reply.sse(include_usage=True), media_type="text/event-stream")
        return JSONResponse(reply.completion())


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""
