"""Originals sealed with AES-256-GCM under keys derived from Keel's payload keys.

Each payload key (`KEEL_PAYLOAD_KEYS`) yields, through HKDF-SHA256 with a purpose of its
own, a 32-byte key for originals, so they are AES-256 whatever the payload key's size and
a key is never used for two purposes. A sealed original names the payload key's id and
binds it, with where the original belongs, as associated data: a row copied under
another call's name does not open.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = ["OriginalSeal", "SealBroken", "derive_key"]

NONCE_BYTES = 12
ORIGINALS_PURPOSE = b"keel masked originals v1"
HASH_PURPOSE = b"keel masking hash v1"


class SealBroken(ValueError):
    """A sealed original does not open: another key under its id, or altered bytes."""


def derive_key(key: bytes, purpose: bytes) -> bytes:
    """A 32-byte key for one purpose, from a payload key."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(key)


class OriginalSeal:
    """Seals with the current payload key's derived key; opens with whichever a row names."""

    def __init__(self, keys: dict[str, bytes], current: str) -> None:
        self._ciphers = {kid: AESGCM(derive_key(k, ORIGINALS_PURPOSE)) for kid, k in keys.items()}
        self.current = current

    def seal(self, plaintext: str, place: str) -> tuple[str, bytes]:
        """(key id, nonce + ciphertext) of `plaintext`, bound to `place`."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.current].encrypt(
            nonce, plaintext.encode("utf-8", "surrogatepass"), _bound(self.current, place)
        )
        return self.current, nonce + sealed

    def open(self, key_id: str, sealed: bytes, place: str) -> str:
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise SealBroken(
                f"The original was sealed with payload key {key_id!r}, which this process "
                "does not have: add it to KEEL_PAYLOAD_KEYS (keep retired keys there)."
            )
        try:
            nonce, body = sealed[:NONCE_BYTES], sealed[NONCE_BYTES:]
            plain = cipher.decrypt(nonce, body, _bound(key_id, place))
        except InvalidTag as exc:
            raise SealBroken(
                f"The original sealed with payload key {key_id!r} does not open: the key "
                "under that id is not the one it was sealed with, or the row was altered."
            ) from exc
        return plain.decode("utf-8", "surrogatepass")


def _bound(key_id: str, place: str) -> bytes:
    return f"{key_id}\n{place}".encode()
