"""Encrypted payloads: an AES-GCM payload codec with named keys, so keys rotate.

Tool arguments (file contents to write, commands), digests and workflow inputs all
cross Temporal as payloads and sit in its history. With `KEEL_PAYLOAD_KEYS` set, every
client and worker encodes each payload as `binary/encrypted`: a fresh 12-byte nonce and
the AES-GCM ciphertext of the whole serialised payload, with the key's id in the
payload's metadata (`encryption-key-id`, as in Temporal's encryption samples) and bound
to the ciphertext as associated data, so a payload cannot be passed off under another
key's name. Decoding picks the key by that id: add a new key and make it current, keep
the old ones, and runs started under them still decode. Payloads that are not
encrypted pass through, so turning encryption on does not strand running runs.

With no key configured nothing here is used: the data converter is `DATA_CONVERTER`
itself, with no codec, so a step does no extra work.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
from collections.abc import Sequence

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadCodec,
)

from keel.worker.config.settings import Settings
from keel.worker.temporal_client import DATA_CONVERTER

__all__ = [
    "ENCRYPTED_ENCODING",
    "KEY_ID_METADATA",
    "EncryptionCodec",
    "PayloadKeyError",
    "data_converter",
    "new_key",
    "payload_codec",
]

ENCRYPTED_ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
NONCE_BYTES = 12
KEY_BYTES = (16, 24, 32)


class PayloadKeyError(ValueError):
    """The configured keys are unusable, or a payload names a key this process lacks."""


class EncryptionCodec(PayloadCodec):
    """Encrypts with the current key; decrypts with whichever key a payload names."""

    def __init__(self, keys: dict[str, bytes], current: str) -> None:
        if current not in keys:
            raise PayloadKeyError(f"The current payload key {current!r} is not among the keys.")
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self.current = current

    @property
    def key_ids(self) -> list[str]:
        return list(self._ciphers)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(p) for p in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        key_id = self.current.encode()
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.current].encrypt(nonce, payload.SerializeToString(), key_id)
        return Payload(
            metadata={"encoding": ENCRYPTED_ENCODING, KEY_ID_METADATA: key_id},
            data=nonce + sealed,
        )

    def decrypt(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCRYPTED_ENCODING:
            return payload  # written before encryption was on, or not Keel's
        key_id = payload.metadata.get(KEY_ID_METADATA, b"").decode(errors="replace")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise PayloadKeyError(
                f"A payload is encrypted with key {key_id!r}, which this process does not "
                "have: add it to KEEL_PAYLOAD_KEYS (keep retired keys there until no run "
                "or schedule uses them)."
            )
        data = payload.data
        try:
            plain = cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], key_id.encode())
        except Exception as exc:  # InvalidTag: altered, truncated or another key's bytes
            raise PayloadKeyError(
                f"A payload encrypted with key {key_id!r} does not decrypt: it was altered, "
                "or the key under that id is not the one it was encrypted with."
            ) from exc
        return Payload.FromString(plain)


def payload_codec(settings: Settings) -> EncryptionCodec | None:
    """The codec `settings` configure, or None when no key is set."""
    if not settings.payload_keys:
        return None
    keys = {
        key_id: _key_bytes(key_id, secret.get_secret_value())
        for key_id, secret in settings.payload_keys.items()
    }
    current = settings.payload_key_id
    if current is None:
        if len(keys) != 1:
            raise PayloadKeyError(
                "KEEL_PAYLOAD_KEYS holds several keys: set KEEL_PAYLOAD_KEY_ID to the one new "
                "payloads are encrypted with."
            )
        [current] = keys
    if current not in keys:
        raise PayloadKeyError(
            f"KEEL_PAYLOAD_KEY_ID is {current!r}, which KEEL_PAYLOAD_KEYS does not hold; "
            f"it holds {', '.join(sorted(keys))}."
        )
    return EncryptionCodec(keys, current)


def data_converter(settings: Settings) -> DataConverter:
    """Keel's converter, encrypting when a key is configured.

    Encrypted, failure messages and stack traces travel as an encoded payload too:
    a tool's error can quote what it read.
    """
    codec = payload_codec(settings)
    if codec is None:
        return DATA_CONVERTER
    return dataclasses.replace(
        DATA_CONVERTER,
        payload_codec=codec,
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )


def new_key() -> str:
    """A fresh 256-bit key, base64, as KEEL_PAYLOAD_KEYS takes it."""
    return base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()


def check_key_id(key_id: str) -> None:
    """Refuse a key id that KEEL_PAYLOAD_KEYS would refuse at start."""
    if not key_id or len(key_id) > 64 or not key_id.isprintable():
        raise PayloadKeyError("A key id in KEEL_PAYLOAD_KEYS must be 1 to 64 printable characters.")


def _key_bytes(key_id: str, encoded: str) -> bytes:
    check_key_id(key_id)
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise PayloadKeyError(
            f"Payload key {key_id!r} is not base64; make one with `keel keys new`."
        ) from exc
    if len(key) not in KEY_BYTES:
        raise PayloadKeyError(
            f"Payload key {key_id!r} is {len(key)} bytes; AES-GCM takes 16, 24 or 32 "
            "(make a 32-byte one with `keel keys new`)."
        )
    return key
