"""How Keel signs webhook bodies, and how a receiver checks them.

Each tenant has its own signing secret, derived from the server's secret with
HMAC-SHA256, so one tenant's secret says nothing about another's or about the
server's. A request carries `X-Keel-Signature: t=<unix seconds>,v1=<hex>`, where
the hex is HMAC-SHA256 under the tenant's secret of `"<t>." + body`. The time is
signed with the body, so a receiver that refuses old timestamps refuses replays.

It also carries the Standard Webhooks headers (standardwebhooks.com), so any of that
spec's libraries verifies it with the same `whsec_` secret: `webhook-id` (the notice
id, the same on every retry), `webhook-timestamp` and `webhook-signature`
(`v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, keyed with the base64
decoding of the secret after `whsec_`, as the spec reads secrets).
`X-Keel-Signature` stays for one release.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

__all__ = [
    "SIGNATURE_HEADER",
    "TOLERANCE_S",
    "signature_header",
    "standard_webhook_headers",
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


def standard_webhook_headers(
    secret: str, msg_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """`webhook-id`, `webhook-timestamp` and `webhook-signature` for one delivery."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    signature = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": f"v1,{signature}",
    }
