"""`keel memories` sends the id or user it was given as one path segment, whatever it holds."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from keel.api.cli.memories import MemoryClient


@pytest.mark.parametrize("value", ["bob?x", "a/b", "c#d", "e%2Ff"])
def test_a_memory_id_or_user_is_one_path_segment(value: str) -> None:
    paths: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.raw_path)
        return httpx.Response(200, json={"tenant_id": "acme", "user": value, "deleted": 0})

    async def main() -> None:
        client = MemoryClient("http://keel.test")
        client._http = httpx.AsyncClient(
            base_url="http://keel.test", transport=httpx.MockTransport(answer)
        )
        async with client:
            await client.delete(value)
            purged = await client.purge(value, None)
        assert purged.user == value

    asyncio.run(main())
    segment = value.replace("%", "%25").replace("?", "%3F").replace("/", "%2F").replace("#", "%23")
    assert paths == [
        f"/v1/memories/{segment}".encode(),
        f"/v1/admin/memories/{segment}".encode(),
    ]
