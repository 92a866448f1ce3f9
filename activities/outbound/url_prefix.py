"""Whether a URL lies under a configured one: same origin, and under its path.

A plain `url.startswith(prefix)` hands `https://agent.example`'s token to
`https://agent.example.evil.net` and to `https://agent.example@evil.net`; comparing the
parsed origin (scheme, host, port) and then the path at a `/` boundary does not.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["longest_prefix", "url_within"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _parts(url: str) -> tuple[tuple[str, str, int | None], str] | None:
    """(scheme, host, port) and the path, or None for what is not an http(s) URL."""
    try:
        split = urlsplit(url.strip())
        port = split.port
    except ValueError:
        return None
    scheme = split.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not split.hostname:
        return None
    return (scheme, split.hostname, port or _DEFAULT_PORTS[scheme]), split.path


def url_within(url: str, prefix: str) -> bool:
    """`url` has `prefix`'s origin and its path is `prefix`'s or below it."""
    mine, theirs = _parts(url), _parts(prefix)
    if mine is None or theirs is None or mine[0] != theirs[0]:
        return False
    base = theirs[1].rstrip("/")
    return not base or mine[1] == base or mine[1].startswith(base + "/")


def longest_prefix(url: str, prefixes: Iterable[str]) -> str | None:
    """The longest of `prefixes` that `url` lies under, if any."""
    matching = [p for p in prefixes if url_within(url, p)]
    return max(matching, key=lambda p: len(p.rstrip("/")), default=None)
