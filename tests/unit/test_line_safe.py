"""Event streams escape the line separators that `splitlines`-style readers split on."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import StreamingResponse

from keel.api.events.line_safe import LineSafeStream, line_safe

TEXT = "a\u2028b\u2029c\x85d\u00e9\U0001f600"


def test_line_safe_json_decodes_to_the_same_text_and_has_one_line() -> None:
    data = line_safe(json.dumps({"text": TEXT}, ensure_ascii=False))
    assert len(data.splitlines()) == 1
    assert json.loads(data) == {"text": TEXT}


async def streamed(parts: list[bytes]) -> str:
    """What `LineSafeStream` sends for a streaming response whose body comes in `parts`."""

    async def body() -> AsyncIterator[bytes]:
        for part in parts:
            yield part

    sent: list[bytes] = []

    async def send(message: Any) -> None:
        if message["type"] == "http.response.body":
            sent.append(message.get("body", b""))

    async def receive() -> Any:
        return {"type": "http.disconnect"}

    response = StreamingResponse(body(), media_type="text/event-stream")
    await LineSafeStream(response)({"type": "http", "asgi": {"spec_version": "2.4"}}, receive, send)
    return b"".join(sent).decode()


async def test_a_stream_split_inside_a_character_is_escaped_all_the_same() -> None:
    encoded = f"data: {json.dumps({'text': TEXT}, ensure_ascii=False)}\n\n".encode()
    # Every cut point, so each separator and the 4-byte emoji is split in every place.
    for cut in range(1, len(encoded)):
        text = (await streamed([encoded[:cut], encoded[cut:]])).strip()
        assert len(text.splitlines()) == 1, cut
        assert json.loads(text.removeprefix("data: ")) == {"text": TEXT}
