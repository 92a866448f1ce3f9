"""The one scripted LLM all implementations talk to.

One server, one port, zero delay. The `bump` agents get a script of `steps`
calls `bump(n=i)` (each passing the previous result) and then an answer; Keel,
which has no `bump` tool, gets the same turns as `read_file` calls on distinct
lines, mounted under `/keel` on the same server.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.routing import Mount

from bench.peers.agent import ANSWER, KEEL_READ_PATH, TOOL_NAME
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn


@dataclass(frozen=True)
class LlmUrls:
    """OpenAI `base_url`s of the scripted server."""

    bump: str
    """For the agents with the `bump` tool."""
    keel: str
    """For Keel, whose script reads lines with `read_file`."""
    nodelay_fixed: bool
    """Whether the server's listening socket needed TCP_NODELAY set here."""


def bump_script(steps: int) -> Script:
    """`steps` turns that call `bump` with the previous result, then the answer."""
    calls = [
        Turn(tool_calls=[ScriptedToolCall(name=TOOL_NAME, arguments={"n": i})])
        for i in range(steps)
    ]
    return Script(turns=[*calls, Turn(content=ANSWER)])


def keel_script(steps: int) -> Script:
    """The same turns as `read_file` of one distinct line each, so Keel's gate runs every call."""
    calls = [
        Turn(
            tool_calls=[
                ScriptedToolCall(
                    name="read_file",
                    arguments={"path": KEEL_READ_PATH, "start_line": i, "end_line": i},
                )
            ]
        )
        for i in range(1, steps + 1)
    ]
    return Script(turns=[*calls, Turn(content=ANSWER)])


@contextmanager
def scripted_llm(steps: int) -> Iterator[LlmUrls]:
    """Serve both scripts from one ScriptedLLMServer until the context exits."""
    server = ScriptedLLMServer(bump_script(steps))
    keel = ScriptedLLMServer(keel_script(steps))
    server.app = Starlette(routes=[Mount("/keel", app=keel.app), Mount("", app=server.app)])
    with server:
        origin = server.base_url.removesuffix("/v1")
        yield LlmUrls(
            bump=server.base_url, keel=f"{origin}/keel/v1", nodelay_fixed=_disable_nagle(server)
        )


def _disable_nagle(server: ScriptedLLMServer) -> bool:
    """Set TCP_NODELAY on the listening socket, which accepted connections inherit (Linux).

    ScriptedLLMServer binds a socket made with protocol 0, and asyncio only turns Nagle
    off on sockets whose protocol is IPPROTO_TCP; so every reply's body waited for the
    client's delayed ACK of its headers, about 40 ms per LLM call, on every side alike.
    True when this had to be done; a no-op once the server sets the option itself.
    """
    uvicorn_server = getattr(server, "_server", None)
    fixed = False
    for listener in getattr(uvicorn_server, "servers", []):
        for sock in listener.sockets:
            if not sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                fixed = True
    return fixed
