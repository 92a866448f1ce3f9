"""A scripted OpenAI-compatible chat completions server for tests and offline demos.

The real `openai` client talks to it over HTTP. Each request is answered with one
turn of a `Script`; the turn is chosen from the request alone (the number of
assistant messages it carries), so a retried request gets the same answer.

A turn can also play a failing provider: with `fail_status` and `fail_times`, the
first `fail_times` requests for that turn are answered with HTTP `fail_status` and
an OpenAI-style error body (plus a `Retry-After` header when `retry_after_s` is
set), at once and without `delay_s`; later requests for the turn get its reply.
Requests are counted per turn since the server started or was last `reset()`.

Two modes make it behave like a real model where context matters:

- `context_window`: every request is measured (`scripted_reviewer.request_tokens`,
  about 4 characters a token of the messages' and tools' JSON) and one larger than
  the window is refused the way OpenAI's API refuses it: HTTP 400 with
  `code: context_length_exceeded` and both figures in the message. Each request's
  size, and how much of it repeats the previous request's prefix (what a provider's
  prompt cache serves), is kept in `requests`; `largest_request` is the maximum.
  Replies then report the measured size as `prompt_tokens`.
- `policy: reviewer`: no script; the reply is decided from the request by
  `scripted_reviewer.reviewer_reply` (list, read what its context has not seen,
  note `# BUG:` lines, report what it knows).

Keel's compaction works in every mode: a request to summarise (its last user message
says "summarise the conversation so far") is answered with the reviewer's summary of
the request and plays no turn, and a request that starts from a summary of steps
1-N counts N assistant messages more, so a script's turns go on where they were.
`summaries: fail` (HTTP 503) or `empty` (no text) plays a model whose summaries are of
no use, for Keel's own fallback summary.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import copy
import hashlib
import json
import math
import signal
import socket
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from keel.worker.scripted import anthropic as anthropic_api
from keel.worker.scripted import memory as scripted_memory
from keel.worker.scripted.openai_wire import (
    Reply,
    context_length_exceeded,
    openai_error,
    scripted_failure,
)
from keel.worker.scripted.provider_play import ProviderPlay
from keel.worker.scripted.request_reading import (
    RequestSize,
    render,
    request_tag,
    summarised_steps,
)
from keel.worker.scripted.reviewer import (
    asks_for_summary,
    message_tokens,
    reviewer_reply,
    tools_tokens,
)
from keel.worker.scripted.router import asks_for_route, route_reply
from keel.worker.scripted.script import Conversation, Script, ScriptedToolCall, Turn

__all__ = ["Conversation", "RequestSize", "Script", "ScriptedLLMServer", "ScriptedToolCall", "Turn"]

_STARTUP_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 10.0
# In-flight (delayed) requests are cancelled this long after stop() asks to shut down.
_GRACEFUL_SHUTDOWN_S = 1
_KEEP_ALIVE_S = 60


class ScriptedLLMServer:
    """Serves a `Script` as an OpenAI-compatible API on a background uvicorn thread.

    `app` is the ASGI app, usable on its own; `start()`/`stop()` (or `with`) run it.
    Counters are safe to read from any thread.
    """

    def __init__(self, script: Script, host: str = "127.0.0.1", port: int = 0) -> None:
        self.script = script
        self.host = host
        self.port = port
        self._lock = threading.Lock()
        self._requests_by_turn: collections.Counter[int] = collections.Counter()
        self._requests_by_conversation: collections.Counter[tuple[str, int]] = collections.Counter()
        self._total_requests = 0
        self._last_requests: dict[int, dict[str, Any]] = {}
        self.streamed_messages = 0
        """Messages API replies sent as server-sent events."""
        self._sizes: list[RequestSize] = []
        # Per conversation: the previous request's tools and messages, for its prefix.
        self._previous: dict[str, tuple[str, list[tuple[str, int]]]] = {}
        self._client_ports: list[int] = []
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._answering = threading.Event()
        self._answering.set()
        self.play = ProviderPlay(script.rate_limit, script.model_failures)
        """The rate limit and failing models, with what they saw."""
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat_completions, methods=["POST"]),
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/v1/embeddings", scripted_memory.embeddings, methods=["POST"]),
            ]
        )

    # -- holding replies ----------------------------------------------------------

    def hold(self) -> None:
        """Keep every reply waiting (counted, but not answered) until `release()`, so a
        run stays in its model call for exactly as long as a test needs it there."""
        self._answering.clear()

    def release(self) -> None:
        """Answer the held requests, and later ones at once."""
        self._answering.set()

    # -- counters ---------------------------------------------------------------

    @property
    def requests_by_turn(self) -> collections.Counter[int]:
        """A snapshot: chat requests by turn index asked for (including past the end)."""
        with self._lock:
            return collections.Counter(self._requests_by_turn)

    @property
    def client_ports(self) -> list[int]:
        """A snapshot: the client's source port of each chat or Messages request, so a test
        can tell a connection reused (the same port again) from a new one."""
        with self._lock:
            return list(self._client_ports)

    @property
    def total_requests(self) -> int:
        """Every chat completion request received, rejected ones included."""
        with self._lock:
            return self._total_requests

    def requests_of(self, match: str) -> collections.Counter[int]:
        """A snapshot: requests by turn index of the conversation that `match` selects."""
        with self._lock:
            return collections.Counter(
                {i: n for (m, i), n in self._requests_by_conversation.items() if m == match}
            )

    def last_request(self, turn: int) -> dict[str, Any]:
        """A copy of the body of the last request that asked for `turn`."""
        with self._lock:
            if turn not in self._last_requests:
                raise KeyError(f"No request has asked for turn {turn} yet.")
            return copy.deepcopy(self._last_requests[turn])

    @property
    def requests(self) -> list[RequestSize]:
        """A snapshot: every measured request in order (with `context_window` or a policy)."""
        with self._lock:
            return list(self._sizes)

    @property
    def largest_request(self) -> int:
        """The largest measured request, in tokens; 0 before any."""
        with self._lock:
            return max((r.tokens for r in self._sizes), default=0)

    def reset(self) -> None:
        """Forget all counted and recorded requests."""
        with self._lock:
            self._requests_by_turn.clear()
            self._requests_by_conversation.clear()
            self._total_requests = 0
            self._last_requests.clear()
            self._sizes.clear()
            self._client_ports.clear()
            self._previous.clear()
        self.play.reset()

    def _measure(self, body: dict[str, Any]) -> RequestSize:
        """Size the request and its prefix shared with its conversation's previous one.

        A conversation is known by its system prompt and first user message, so a
        parent's and its sub-agents' requests, interleaved, are each compared with
        their own conversation's previous request, as a provider's cache would serve them.
        """
        tools = json.dumps(body.get("tools") or [], sort_keys=True)
        messages = [(json.dumps(m, sort_keys=True), message_tokens(m)) for m in body["messages"]]
        tokens = tools_tokens(body.get("tools")) + sum(n for _, n in messages)
        opening = [text for text, _ in messages[:2]]
        conversation = hashlib.sha256("\n".join(opening).encode()).hexdigest()[:12]
        with self._lock:
            prefix = 0
            previous = self._previous.get(conversation)
            if previous is not None and previous[0] == tools:
                prefix = tools_tokens(body.get("tools"))
                for (text, n), (before, _) in zip(messages, previous[1], strict=False):
                    if text != before:
                        break
                    prefix += n
            self._previous[conversation] = (tools, messages)
            window = self.script.context_window
            size = RequestSize(
                tokens=tokens,
                prefix_tokens=prefix,
                rejected=window is not None and tokens > window,
                conversation=conversation,
            )
            self._sizes.append(size)
        return size

    # -- running ----------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The OpenAI `base_url`, e.g. `http://127.0.0.1:PORT/v1`; known once started."""
        if self.port == 0:
            raise RuntimeError("The server has no port yet; call start() first.")
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.host, self.host)
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/v1"

    def start(self) -> None:
        """Bind the port, serve on a background thread and wait until it accepts connections."""
        if self._thread is not None:
            raise RuntimeError("The scripted LLM server is already running; call stop() first.")
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        # Keep the port across restarts so base_url stays valid.
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            lifespan="off",
            log_config=None,
            log_level="warning",
            access_log=False,
            # Longer than a client keeps an idle connection in its pool (httpx: 5 s), as
            # a provider's is: at uvicorn's 5 s the server could close a connection just
            # as the client sent on it, which no provider does to a client's fresh pool.
            timeout_keep_alive=_KEEP_ALIVE_S,
            timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN_S,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="scripted-llm", daemon=True
        )
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                sock.close()
                raise RuntimeError(
                    f"The scripted LLM server did not start on {self.host}:{self.port}; "
                    "see the uvicorn log above."
                )
            time.sleep(0.01)

    def stop(self) -> None:
        """Shut the server down; in-flight requests are cancelled after a short grace."""
        self.release()  # a held request must not keep its thread waiting
        server, thread = self._server, self._thread
        self._server, self._thread = None, None
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(_STOP_TIMEOUT_S)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- endpoints --------------------------------------------------------------

    async def _models(self, request: Request) -> Response:
        model = {"id": self.script.name, "object": "model", "created": 0, "owned_by": "keel"}
        return JSONResponse({"object": "list", "data": [model]})

    async def answer(self, request: Request) -> Response:
        """Answer one chat completion request with this script; a server that plays
        several scripts (`keel.worker.scripted.models`) hands each request to one of these."""
        return await self._chat_completions(request)

    async def _messages(self, request: Request) -> Response:
        """Anthropic's Messages API over the same script (`keel.worker.scripted.anthropic`)."""
        self._note_port(request)
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("max_tokens"), int):
            failed = openai_error("A Messages request is a JSON object with `max_tokens`.")
            return JSONResponse(anthropic_api.error_body(400, json.loads(bytes(failed.body))), 400)
        answer = await self._chat(anthropic_api.chat_request(body))
        reply = json.loads(bytes(answer.body))
        if answer.status_code != 200:
            headers = {k: v for k, v in answer.headers.items() if k.lower() == "retry-after"}
            error = anthropic_api.error_body(answer.status_code, reply)
            return JSONResponse(error, answer.status_code, headers=headers)
        message = anthropic_api.message_body(reply)
        if body.get("stream"):
            with self._lock:
                self.streamed_messages += 1
            return StreamingResponse(
                iter(list(anthropic_api.sse(message))),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache"},
            )
        return JSONResponse(message)

    def _note_port(self, request: Request) -> None:
        if request.client is not None:
            with self._lock:
                self._client_ports.append(request.client.port)

    async def _chat_completions(self, request: Request) -> Response:
        self._note_port(request)
        try:
            body = await request.json()
        except ValueError:
            body = None
        return self.play.stamp(self.play.refusal(body) or await self._chat(body))

    async def _chat(self, body: object) -> Response:
        """The scripted answer to a chat-completions request body."""
        with self._lock:
            self._total_requests += 1
        if body is None:
            return openai_error(
                "The request body is not valid JSON; send a chat completion request."
            )
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return openai_error("The request body needs a `messages` list.", param="messages")
        messages: list[object] = body["messages"]
        if asks_for_route(messages):
            # Keel's routing request is answered from its text in every mode; it is no turn.
            text = route_reply(messages)
            model = str(body.get("model") or self.script.name)
            return JSONResponse(Reply(Turn(content=text), 0, text, model).completion())
        # A compacted conversation stands for its first steps with a summary that says
        # how many: one assistant message each, so the turn count goes on from there.
        index = summarised_steps(messages) + sum(
            1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant"
        )
        if scripted_memory.asks_for_facts(messages):
            # Agent memory's extraction call: answered from the request, and no turn.
            refusal = scripted_memory.refuses_schema(body)
            facts = Turn(content=scripted_memory.facts_reply(messages))
            return refusal or self._respond(body, facts, 0)
        summarising = asks_for_summary(messages)
        match, turns = self.script.turns_for(messages)
        with self._lock:
            if not summarising:
                self._requests_by_turn[index] += 1
                self._requests_by_conversation[match, index] += 1
                self._last_requests[index] = copy.deepcopy(body)
            attempt = self._requests_by_conversation[match, index]
        size: RequestSize | None = None
        if self.script.context_window is not None or self.script.policy is not None:
            size = self._measure(body)
            if size.rejected:
                return context_length_exceeded(self.script.context_window or 0, size.tokens)
        if summarising and self.script.summaries == "fail":
            return openai_error("Scripted summary failure.", status=503)
        if summarising and self.script.summaries == "empty":
            return self._respond(body, Turn(content=""), index)
        if self.script.policy is not None or summarising:
            # A compaction's request is answered with a summary in every mode; it is no turn.
            if not self._answering.is_set():
                await asyncio.to_thread(self._answering.wait)
            plain = self.script.policy == "plain_reviewer"
            return self._respond(body, _reviewer_turn(body, size, plain=plain), index)
        if index >= len(turns):
            return openai_error(
                f"script exhausted: the request carries {index} assistant messages but "
                f"script {self.script.name!r} has only {len(turns)} turns; add turns or "
                "reset the conversation."
            )
        else:
            turn = turns[index]
        if turn.fail_status is not None and attempt <= turn.fail_times:
            return scripted_failure(turn.fail_status, turn, index, attempt)
        if not self._answering.is_set():
            await asyncio.to_thread(self._answering.wait)
        if turn.delay_s > 0:
            await asyncio.sleep(turn.delay_s)
        if size is not None:
            turn = turn.model_copy(update={"prompt_tokens": size.tokens})
        return self._respond(body, turn, index)

    def _respond(self, body: dict[str, Any], turn: Turn, index: int) -> Response:
        messages: list[object] = body["messages"]
        policy = self.script.policy is not None
        reply = Reply(
            turn=turn,
            index=index,
            content=turn.content
            if policy or turn.content is None
            else render(turn.content, messages),
            model=str(body.get("model") or self.script.name),
            # A compacted conversation carries fewer assistant messages than the run made:
            # ids from the request's content stay unique where the turn index repeats.
            call_tag=request_tag(messages) if policy else "",
        )
        if body.get("stream"):
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            return StreamingResponse(
                reply.sse(include_usage),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache"},
            )
        return JSONResponse(reply.completion())


def _reviewer_turn(body: dict[str, Any], size: RequestSize | None, *, plain: bool = False) -> Turn:
    """The reviewer policy's reply to this request, as a turn."""
    tools = [
        str(t.get("function", {}).get("name"))
        for t in body.get("tools") or []
        if isinstance(t, dict) and isinstance(t.get("function"), dict)
    ]
    reply = reviewer_reply(
        body["messages"], tools, may_call=body.get("tool_choice") != "none", plain=plain
    )
    return Turn(
        content=reply.content,
        tool_calls=[ScriptedToolCall(name=n, arguments=a) for n, a in reply.tool_calls],
        prompt_tokens=size.tokens if size is not None else 0,
        completion_tokens=math.ceil(len(reply.content) / 4) + 20 * len(reply.tool_calls),
    )


def main(argv: list[str] | None = None) -> None:
    """Serve a script file until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m keel.worker.scripted.llm",
        description="Serve a scripted OpenAI-compatible chat completions API.",
    )
    parser.add_argument("script", type=Path, help="script file (.json, .yaml or .yml)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args(argv)
    script = Script.load(args.script)
    server = ScriptedLLMServer(script, host=args.host, port=args.port)
    server.start()
    plays = f"policy {script.policy}" if script.policy else f"{len(script.turns)} turns"
    print(
        f"Serving script {script.name!r} ({plays}) at {server.base_url}; press Ctrl-C to stop.",
        flush=True,
    )
    stopping = threading.Event()
    # SIGTERM (e.g. from a process manager) stops as cleanly as Ctrl-C.
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    try:
        stopping.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
