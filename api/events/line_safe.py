"""Server-sent events that every line-reading client splits where the stream means to.

SSE ends a line only at CR, LF or CRLF, and JSON escapes those inside strings. But
U+0085, U+2028 and U+2029 stay raw in JSON text, and common clients read event streams
with `str.splitlines` semantics, which end a line at each of them too: httpx's
`aiter_lines` does, and so the a2a-sdk's own client. A task id, a message or a model's
answer with one of them then reaches such a client as a cut-off JSON document. Keel
writes them as JSON escapes (`\\u2028`), which decode to the same text.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

__all__ = ["LineSafeStream", "line_safe"]

_ESCAPES = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_TABLE = str.maketrans(_ESCAPES)
_BYTE_ESCAPES = {raw.encode(): escaped.encode() for raw, escaped in _ESCAPES.items()}


def line_safe(json_text: str) -> str:
    """JSON text with the line separators `splitlines` knows, beyond CR and LF, escaped.

    Only for JSON: outside strings these characters are not valid JSON anyway, so every
    one of them is inside a string, where the escape means the same character.
    """
    return json_text.translate(_TABLE)


def _line_safe_bytes(chunk: bytes) -> bytes:
    for raw, escaped in _BYTE_ESCAPES.items():
        chunk = chunk.replace(raw, escaped)
    return chunk


def _incomplete_tail(chunk: bytes) -> int:
    """How many bytes at the end of `chunk` start a UTF-8 character it does not finish."""
    for back in range(1, min(3, len(chunk)) + 1):
        byte = chunk[-back]
        if byte & 0xC0 == 0x80:  # a continuation byte: look further back for the lead
            continue
        width = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4
        return back if byte >= 0xC0 and width > back else 0
    return 0


class LineSafeStream(Response):
    """A wrapper around an event-stream response (one whose events another library
    writes, such as the a2a-sdk's) that escapes the separators as `line_safe` does.

    A character split across two body chunks is held back until it is whole, so the
    escape cannot be missed.
    """

    def __init__(self, response: Response) -> None:
        self.response = response
        self.status_code = response.status_code
        self.raw_headers = response.raw_headers
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        held = b""

        async def escaped(message: MutableMapping[str, Any]) -> None:
            nonlocal held
            if message["type"] == "http.response.body":
                body = held + bytes(message.get("body", b""))
                keep = 0 if not message.get("more_body", False) else _incomplete_tail(body)
                held = body[len(body) - keep :] if keep else b""
                message = {**message, "body": _line_safe_bytes(body[: len(body) - keep])}
            await send(message)

        await self.response(scope, receive, escaped)
