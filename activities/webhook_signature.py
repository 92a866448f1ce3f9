"""How Keel signs webhook bodies, and how a receiver checks them.

Each tenant has its own signing secret, derived from the server's secret with
HMAC-SHA256, so one tenant's secret says nothing about another's or about the
server's. A request carries `X-Keel-Signature: t=<unix seconds>,v1=<hex>`, where
the hex is HMAC-SHA256 under the tenant's secret of `"<t>." + body`. The time is
signed with the body, so a receiver that refuses old timestamps refuses replays.
"""

from __future__ import annotations

import hashlib
import hmac
import time

__all__ = [
    "SIGNATURE_HEADER",
    "TOLERANCE_S",
    "signature_header",
    "tenant_signing_secret",
    "verify_signature",
]

SIGNATURE_HEADER = "X-Keel-Signature"
TOLERANCE_S = 300
SECRET_PREFIX = "whsec_"
_DERIVATION_LABEL = b"keel-webhook-signing:v1:"


def tenant_signing_secret(server_secret: bytes, tenant_id: str) -> str:
    """The secret a tenant's receivers verify with (`whsec_` and 64 hex digits)."""
    digest = hmac.new(server_secret, _DERIVATION_LABEL + tenant_id.encode(), hashlib.sha256)
    return SECRET_PREFIX + digest.hexdigest()


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    """The `X-Keel-Signature` value for a body sent at `timestamp` (Unix seconds)."""
    return f"t={timestamp},v1={_digest(secret, timestamp, body)}"


def verify_signature(
    secret: str,
    header: str,
    body: bytes,
    *,
    tolerance_s: int = TOLERANCE_S,
    now: float | None = None,
) -> bool:
    """Whether `header` signs exactly `body` under `secret`, within `tolerance_s` of now."""
    parts: dict[str, list[str]] = {}
    for item in header.split(","):
        key, _, value = item.strip().partition("=")
        parts.setdefault(key, []).append(value)
    stamps = parts.get("t", [])
    if len(stamps) != 1 or not stamps[0].isdigit():
        return False
    timestamp = int(stamps[0])
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_s:
        return False
    expected = _digest(secret, timestamp, body)
    return any(hmac.compare_digest(expected, given) for given in parts.get("v1", []))


def _digest(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
