"""Sealing values at rest: AES-GCM under named keys, bound to where the value belongs.

The keys are the payload keys (`KEEL_PAYLOAD_KEYS`), so one rotation covers Temporal
payloads and the credentials Keel stores. Each sealed value carries its key's id, and
the associated data names the row it belongs to, so a sealed token copied into another
user's row does not open.
"""

from __future__ import annotations

import os

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE_BYTES = 12


class SealError(ValueError):
    """A sealed value names a key this process lacks, or does not open under its key."""


class Sealer:
    """Seals with the current key; opens with whichever key a value names."""

    def __init__(self, keys: dict[str, bytes], current: str) -> None:
        if current not in keys:
            raise SealError(f"The current key {current!r} is not among the keys.")
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self._current = current

    def seal(self, plain: str, bound_to: str) -> bytes:
        """`key id length, key id, nonce, ciphertext`, with `bound_to` as associated data."""
        key_id = self._current.encode()
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self._current].encrypt(nonce, plain.encode(), bound_to.encode())
        return bytes([len(key_id)]) + key_id + nonce + sealed

    def open(self, sealed: bytes, bound_to: str) -> str:
        size = sealed[0] if sealed else 0
        key_id = sealed[1 : 1 + size].decode(errors="replace")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise SealError(
                f"A stored credential is sealed with key {key_id!r}, which this process does "
                "not have: keep retired keys in KEEL_PAYLOAD_KEYS until nothing uses them."
            )
        body = sealed[1 + size :]
        try:
            plain = cipher.decrypt(body[:NONCE_BYTES], body[NONCE_BYTES:], bound_to.encode())
        except Exception as exc:  # InvalidTag: altered, moved to another row, another key
            raise SealError(
                "A stored credential does not open: it was altered or belongs elsewhere."
            ) from exc
        return plain.decode()
