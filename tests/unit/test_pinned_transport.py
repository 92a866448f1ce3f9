"""The pinned transport connects to the checked address by its IP, yet the request keeps
its host: the `Host` header, and for https the TLS server name and certificate check."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from keel.activities.outbound.pinned_transport import PinnedAddresses, pinned_transport

# Reserved, so no resolver answers it: only the pin can lead anywhere.
NAME = "hooks.keel-test.invalid"


@asynccontextmanager
async def receiver(tls: ssl.SSLContext | None = None) -> AsyncIterator[tuple[int, list[bytes]]]:
    """A one-route HTTP server on 127.0.0.1 that answers 204 and keeps what it was sent."""
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            seen.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=tls)
    async with server:
        yield server.sockets[0].getsockname()[1], seen


def certificate(tmp: Path, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A self-signed certificate for `name`: the server's context, and a client's that
    trusts it."""
    key, cert = tmp / f"{name}.key", tmp / f"{name}.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}"),
            *("-addext", f"subjectAltName=DNS:{name}"),
        ],
        check=True,
        capture_output=True,
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    client = ssl.create_default_context(cafile=str(cert))
    return server, client


async def test_a_pinned_name_reaches_its_address_with_its_host_header() -> None:
    async with receiver() as (port, seen):
        pins = PinnedAddresses()
        pins.pin(f"http://{NAME}:{port}/", ["127.0.0.1"])
        async with httpx.AsyncClient(transport=pinned_transport(pins)) as http:
            response = await http.post(f"http://{NAME}:{port}/hook?x=1", content=b"{}")
    assert response.status_code == 204
    assert seen[0].startswith(b"POST /hook?x=1 HTTP/1.1")
    assert f"host: {NAME}:{port}".encode() in seen[0].lower()


async def test_a_host_nobody_pinned_is_not_connected_to() -> None:
    async with receiver() as (port, seen):
        pins = PinnedAddresses()
        pins.pin(f"http://{NAME}:{port}/", ["127.0.0.1"])
        async with httpx.AsyncClient(transport=pinned_transport(pins)) as http:
            with pytest.raises(httpx.ConnectError, match="not checked"):
                await http.get(f"http://127.0.0.1:{port}/")
    assert seen == []


async def test_https_checks_the_certificate_of_the_name_not_of_the_address(
    tmp_path: Path,
) -> None:
    server_tls, client_tls = certificate(tmp_path, NAME)
    async with receiver(server_tls) as (port, seen):
        pins = PinnedAddresses()
        pins.pin(f"https://{NAME}:{port}/", ["127.0.0.1"])
        async with httpx.AsyncClient(transport=pinned_transport(pins, client_tls)) as http:
            response = await http.get(f"https://{NAME}:{port}/hook")
        assert response.status_code == 204
        assert f"host: {NAME}:{port}".encode() in seen[0].lower()

    # A certificate for another name does not pass, though the address is the same.
    other_tls, other_client = certificate(tmp_path, "other.keel-test.invalid")
    async with receiver(other_tls) as (port, _):
        pins = PinnedAddresses()
        pins.pin(f"https://{NAME}:{port}/", ["127.0.0.1"])
        async with httpx.AsyncClient(transport=pinned_transport(pins, other_client)) as http:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await http.get(f"https://{NAME}:{port}/hook")


async def test_a_receiver_under_a_private_ca_named_by_ssl_cert_file_is_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server_tls, _ = certificate(tmp_path, NAME)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / f"{NAME}.pem"))
    async with receiver(server_tls) as (port, _):
        pins = PinnedAddresses()
        pins.pin(f"https://{NAME}:{port}/", ["127.0.0.1"])
        async with httpx.AsyncClient(transport=pinned_transport(pins)) as http:
            response = await http.get(f"https://{NAME}:{port}/hook")
    assert response.status_code == 204


async def test_ipv4_and_ipv6_take_turns_within_one_connect_timeout() -> None:
    # Nothing listens on these IPv6 addresses: each refuses, and IPv4 is tried first anyway.
    async with receiver() as (port, seen):
        pins = PinnedAddresses()
        pins.pin(f"http://{NAME}:{port}/", ["::1", "2001:db8::1", "127.0.0.1"])
        assert pins._pins[(NAME, port)] == ["127.0.0.1", "::1", "2001:db8::1"]
        timeout = httpx.Timeout(5.0)
        async with httpx.AsyncClient(transport=pinned_transport(pins), timeout=timeout) as http:
            response = await http.get(f"http://{NAME}:{port}/")
    assert response.status_code == 204 and seen
