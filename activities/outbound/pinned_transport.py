"""An httpx transport that connects only to addresses already checked.

`keel.activities.outbound.targets` resolves a URL's host and checks where it leads; if httpx
then looked the name up again, a name could answer a public address to the check and
this machine's own to the connection (DNS rebinding). So the checked addresses are
pinned here, and the transport connects to one of them by its IP. The URL is left as
it is, so the request keeps its `Host` header, and for https the TLS server name (SNI)
and the certificate's check are still the URL's host name (httpcore takes both from the
request's origin, not from the address it connected to). A host nobody pinned is not
connected to at all. Proxies from the environment are not used: a proxy would look the
name up itself.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable

import httpcore
import httpx

__all__ = ["PinnedAddresses", "pinned_transport"]


class PinnedAddresses(httpcore.AsyncNetworkBackend):
    """The checked addresses of each host and port, and a network backend that connects
    to those only."""

    def __init__(self) -> None:
        self._pins: dict[tuple[str, int], list[str]] = {}
        self._backend = httpcore.AnyIOBackend()

    def pin(self, url: str, addresses: Iterable[str]) -> None:
        """Connect to `addresses` for `url`'s host and port: IPv4 and IPv6 in turn, IPv4
        first, until one answers (a network that drops IPv6 costs one address's share of
        the timeout, not all of it)."""
        self._pins[_origin(url)] = _interleaved(addresses)

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = self._pins.get((host.lower(), port))
        if not addresses:
            raise httpcore.ConnectError(f"{host}:{port} was not checked, so it is not reached.")
        failure: Exception | None = None
        # The connect timeout is shared, so every address gets its turn within it.
        each = timeout / len(addresses) if timeout is not None else None
        for address in addresses:
            try:
                return await self._backend.connect_tcp(
                    address,
                    port,
                    timeout=each,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("Only checked TCP addresses are reached.")

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


def pinned_transport(
    pins: PinnedAddresses, ssl_context: ssl.SSLContext | None = None
) -> httpx.AsyncHTTPTransport:
    """httpx's own transport, its connection pool on `pins` instead of the system resolver;
    certificates are checked against `ssl_context` (default: httpx's, the certifi roots,
    or `SSL_CERT_FILE` / `SSL_CERT_DIR` where set, for a receiver under a private CA)."""
    transport = httpx.AsyncHTTPTransport()
    # httpx has no argument for a network backend; its pool is httpcore's, which has one.
    # Given a transport, httpx uses no proxy from the environment.
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=ssl_context or httpx.create_ssl_context(),
        network_backend=pins,
    )
    return transport


def _interleaved(addresses: Iterable[str]) -> list[str]:
    """IPv4 and IPv6 addresses alternating, IPv4 first, each family in its given order."""
    given = list(addresses)
    four = [a for a in given if ":" not in a]
    six = [a for a in given if ":" in a]
    mixed = [a for pair in zip(four, six, strict=False) for a in pair]
    longer = four if len(four) > len(six) else six
    return mixed + longer[min(len(four), len(six)) :]


def _origin(url: str) -> tuple[str, int]:
    """The host and port as httpcore will ask to connect to them (IDNA, lower case)."""
    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return parsed.raw_host.decode("ascii").lower(), port
