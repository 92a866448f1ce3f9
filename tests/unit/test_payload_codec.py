"""The AES-GCM payload codec: round trips, rotation, tampering and key configuration."""

from __future__ import annotations

import base64

import pytest
from temporalio.api.common.v1 import Payload

from keel.worker.config.settings import Settings
from keel.worker.payload_codec import (
    ENCRYPTED_ENCODING,
    KEY_ID_METADATA,
    EncryptionCodec,
    PayloadKeyError,
    data_converter,
    new_key,
    payload_codec,
)
from keel.worker.temporal_client import DATA_CONVERTER

PLAIN = Payload(metadata={"encoding": b"json/plain"}, data=b'{"content": "rm -rf build"}')


def keys(**named: str) -> Settings:
    return Settings.model_validate({"KEEL_PAYLOAD_KEYS": named})


def codec_of(settings: Settings) -> EncryptionCodec:
    codec = payload_codec(settings)
    assert codec is not None
    return codec


async def test_a_payload_round_trips_and_is_ciphertext_in_between() -> None:
    codec = codec_of(keys(k1=new_key()))
    [sealed] = await codec.encode([PLAIN])
    assert sealed.metadata["encoding"] == ENCRYPTED_ENCODING
    assert sealed.metadata[KEY_ID_METADATA] == b"k1"
    assert b"rm -rf" not in sealed.SerializeToString()
    assert await codec.decode([sealed]) == [PLAIN]
    # A fresh nonce each time: the same payload never encrypts to the same bytes.
    [again] = await codec.encode([PLAIN])
    assert again.data != sealed.data


async def test_old_keys_still_decrypt_after_rotation_and_unknown_ones_are_named() -> None:
    old, new = new_key(), new_key()
    [sealed] = await codec_of(keys(old=old)).encode([PLAIN])
    rotated = codec_of(
        Settings.model_validate(
            {"KEEL_PAYLOAD_KEYS": {"old": old, "new": new}, "KEEL_PAYLOAD_KEY_ID": "new"}
        )
    )
    assert await rotated.decode([sealed]) == [PLAIN]
    [fresh] = await rotated.encode([PLAIN])
    assert fresh.metadata[KEY_ID_METADATA] == b"new"
    with pytest.raises(PayloadKeyError, match=r"'new'.*KEEL_PAYLOAD_KEYS"):
        await codec_of(keys(old=old)).decode([fresh])


async def test_altered_or_renamed_ciphertext_does_not_decrypt() -> None:
    key = new_key()
    codec = codec_of(
        Settings.model_validate(
            {"KEEL_PAYLOAD_KEYS": {"a": key, "b": key}, "KEEL_PAYLOAD_KEY_ID": "a"}
        )
    )
    [sealed] = await codec.encode([PLAIN])
    flipped = Payload(
        metadata=sealed.metadata, data=sealed.data[:-1] + bytes([sealed.data[-1] ^ 1])
    )
    with pytest.raises(PayloadKeyError, match="does not decrypt"):
        await codec.decode([flipped])
    # The key id is bound to the ciphertext: the same bytes under another id are refused.
    renamed = Payload(metadata={**sealed.metadata, KEY_ID_METADATA: b"b"}, data=sealed.data)
    with pytest.raises(PayloadKeyError, match="does not decrypt"):
        await codec.decode([renamed])


async def test_payloads_written_before_encryption_pass_through() -> None:
    assert await codec_of(keys(k=new_key())).decode([PLAIN]) == [PLAIN]


def test_no_key_leaves_the_converter_as_it_was() -> None:
    assert payload_codec(Settings()) is None
    assert data_converter(Settings()) is DATA_CONVERTER


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KEEL_PAYLOAD_KEYS": {"a": new_key(), "b": new_key()}}, "set KEEL_PAYLOAD_KEY_ID"),
        ({"KEEL_PAYLOAD_KEYS": {"a": new_key()}, "KEEL_PAYLOAD_KEY_ID": "z"}, "does not hold"),
        ({"KEEL_PAYLOAD_KEYS": {"a": "not base64!"}}, "not base64"),
        ({"KEEL_PAYLOAD_KEYS": {"a": base64.b64encode(b"short").decode()}}, "is 5 bytes"),
    ],
)
def test_unusable_keys_are_refused_at_start_without_showing_them(
    env: dict[str, object], message: str
) -> None:
    with pytest.raises(PayloadKeyError, match=message) as refused:
        payload_codec(Settings.model_validate(env))
    for value in env["KEEL_PAYLOAD_KEYS"].values():  # type: ignore[attr-defined]
        assert value not in str(refused.value)
