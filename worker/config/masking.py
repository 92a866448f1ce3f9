"""The masking policy's keys, from settings: checked at start, so a policy never runs
without the keys that keep its originals."""

from __future__ import annotations

from keel.activities.masking import Masker, OriginalSeal, ReadableCopies
from keel.activities.masking.sealing import HASH_PURPOSE, derive_key
from keel.activities.store.originals_store import OriginalsStore
from keel.activities.store.store_pool import PooledStore
from keel.worker.config.settings import Settings
from keel.worker.payload_codec import PayloadKeyError, _key_bytes

__all__ = ["MIN_HASH_KEY_CHARS", "MaskingSetupError", "original_seal", "readable_copies"]

MIN_HASH_KEY_CHARS = 32


class MaskingSetupError(ValueError):
    """The masking policy cannot run as configured; the message says what to set."""


def original_seal(settings: Settings) -> OriginalSeal | None:
    """The seal of originals: every payload key, the current one sealing; None without keys."""
    if not settings.payload_keys:
        return None
    keys = {
        kid: _key_bytes(kid, key.get_secret_value()) for kid, key in settings.payload_keys.items()
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
        raise PayloadKeyError(f"KEEL_PAYLOAD_KEY_ID is {current!r}, which KEEL_PAYLOAD_KEYS lacks.")
    return OriginalSeal(keys, current)


def masker(settings: Settings) -> Masker | None:
    """The policy with its hash key; None when no rule is set. Raises `MaskingSetupError`."""
    if not settings.masking_policy.enabled:
        return None
    if not settings.payload_keys:
        raise MaskingSetupError(
            "KEEL_MASKING_POLICY is set but KEEL_PAYLOAD_KEYS is not: the originals of masked "
            "values are sealed with the payload keys. Make one with `keel keys new` and set "
            "it on the API and every worker."
        )
    if settings.masking_hash_key is not None:
        secret = settings.masking_hash_key.get_secret_value()
        if len(secret) < MIN_HASH_KEY_CHARS:
            raise MaskingSetupError(
                f"KEEL_MASKING_HASH_KEY is {len(secret)} characters; use at least "
                f"{MIN_HASH_KEY_CHARS} (`keel keys new` makes one)."
            )
        base = secret.encode()
    else:
        seal_keys = settings.payload_keys
        current = settings.payload_key_id or next(iter(seal_keys))
        base = _key_bytes(current, seal_keys[current].get_secret_value())
    return Masker(settings.masking_policy, derive_key(base, HASH_PURPOSE))


def readable_copies(settings: Settings, store: PooledStore) -> ReadableCopies:
    """What the tool and LLM activities store calls through; a no-op with no policy."""
    policy = masker(settings)
    if policy is None:
        return ReadableCopies.off()
    return ReadableCopies(OriginalsStore(store.pool), policy, original_seal(settings))
