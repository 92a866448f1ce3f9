"""Where Keel may send a webhook, an A2A push notification or a coordination's task.

A URL is given by a client, so it could point Keel's servers at what only they can
reach: their own loopback, the cluster's private network, a cloud's link-local
metadata service. So the host is resolved and every address it resolves to must be one
the operator allows (`KEEL_WEBHOOK_TARGETS`), checked when the URL is registered and
again before each delivery, because a name can resolve elsewhere by then. A delivery
connects to an address this check returned (`keel.activities.outbound.pinned_transport`), never to a
fresh lookup of the name, so a name that answers a public address to the check and a
private one to the connection (DNS rebinding) still reaches only the checked address.
Public receivers need https unless `KEEL_WEBHOOK_ALLOW_HTTP` says otherwise.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

__all__ = [
    "Resolve",
    "TargetKind",
    "WebhookHostUnresolved",
    "WebhookTargetPolicy",
    "WebhookTargetRefused",
    "WebhookTargets",
    "check_webhook_target",
    "resolve_host",
]

TargetKind = Literal["webhook", "A2A agent"]
"""What a checked URL is, for the words of a refusal."""
WebhookTargets = Literal["public", "loopback", "private"]
"""`public`: only public addresses. `loopback`: also this machine's own (the default,
what a one-machine dev stack and the tests need). `private`: also private, link-local,
shared and unique-local networks (an intranet receiver)."""
Resolve = Callable[[str, int], Awaitable[list[str]]]
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class WebhookTargetRefused(ValueError):
    """The URL may not be sent to; the message says why and what to do."""


class WebhookHostUnresolved(WebhookTargetRefused):
    """The host did not resolve: maybe a typo, maybe a passing DNS failure."""


class WebhookTargetPolicy(BaseModel):
    """What the operator allows, from `KEEL_WEBHOOK_TARGETS` and `KEEL_WEBHOOK_ALLOW_HTTP`."""

    model_config = ConfigDict(frozen=True)

    targets: WebhookTargets = "loopback"
    allow_http: bool = False
    """Plain http to public receivers too; otherwise http only to allowed non-public ones."""


async def resolve_host(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (an IP literal resolves to itself)."""
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise WebhookHostUnresolved(
            f"The host {host} does not resolve ({exc}); check the URL's host name."
        ) from None
    return sorted({str(info[4][0]) for info in found})


def _plain(text: str) -> IpAddress:
    """The address without a zone, an IPv4-mapped IPv6 one as the IPv4 it is."""
    address = ipaddress.ip_address(text.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def kind_of(address: IpAddress) -> Literal["public", "loopback", "private"]:
    """Which of the operator's classes an address falls in."""
    if address.is_loopback:
        return "loopback"
    if (
        address.is_private
        or address.is_link_local
        or address.is_reserved
        or address.is_multicast
        or address.is_unspecified
        or address in _SHARED
        or not address.is_global
    ):
        return "private"
    return "public"


_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT, not global
_ALLOWED: dict[WebhookTargets, frozenset[str]] = {
    "public": frozenset({"public"}),
    "loopback": frozenset({"public", "loopback"}),
    "private": frozenset({"public", "loopback", "private"}),
}
_WHO: dict[TargetKind, str] = {"webhook": "receiver", "A2A agent": "agent"}
_CLEAR: dict[TargetKind, str] = {
    "webhook": "notices are signed but not encrypted",
    "A2A agent": "the task, the agent's answer and any token would travel unencrypted",
}
_WORDS = {
    "loopback": "this machine's own (loopback)",
    "private": "a private, link-local or otherwise non-public",
}


async def check_webhook_target(
    url: str,
    policy: WebhookTargetPolicy,
    resolve: Resolve = resolve_host,
    *,
    what: TargetKind = "webhook",
) -> list[str]:
    """Refuse `url` unless every address its host resolves to is allowed, and its scheme
    suits them; the addresses it checked, to connect to. Only the host goes into a
    refusal: a URL's path or query may hold a token. `what` the URL is, for the words."""
    parts = urlsplit(url)
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host:
        raise WebhookTargetRefused(f"A {what} URL must be an http:// or https:// URL with a host.")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise WebhookTargetRefused(
            f"The {what} URL's port is not a number (host {host})."
        ) from None
    resolved = await resolve(host, port)
    addresses = [_plain(a) for a in resolved]
    if not addresses:
        raise WebhookHostUnresolved(f"The {what} host {host} resolves to no address.")
    allowed = _ALLOWED[policy.targets]
    kinds = {kind_of(a) for a in addresses}
    for address in addresses:
        kind = kind_of(address)
        if kind not in allowed:
            raise WebhookTargetRefused(
                f"The {what} host {host} resolves to {address}, {_WORDS[kind]} address, "
                f"which this server does not send to (KEEL_WEBHOOK_TARGETS={policy.targets}). "
                f"Use a public {_WHO[what]}, or ask the operator to allow "
                f"{'loopback' if kind == 'loopback' else 'private'} targets."
            )
    if parts.scheme == "http" and "public" in kinds and not policy.allow_http:
        raise WebhookTargetRefused(
            f"The {what} URL for {host} must use https://: {_CLEAR[what]}, and this server "
            "sends plain http only to non-public receivers (KEEL_WEBHOOK_ALLOW_HTTP=true "
            "allows it)."
        )
    return resolved
