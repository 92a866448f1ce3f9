"""The keys behind users' credentials and secrets: sealing at rest, signing assertions.

Sealing uses the payload keys (`KEEL_PAYLOAD_KEYS`, the current one for new values),
so rotating them covers what Keel stores too. With none configured (a local stack),
a key made once in the data directory is used, shared by the API and the worker that
run there. Subject assertions for token exchange are signed with the JWT secret
Keel's own tokens use (or its local one).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

from psycopg_pool import AsyncConnectionPool

from keel.activities.credentials.credential_store import CredentialStore
from keel.activities.credentials.sealing import Sealer
from keel.activities.credentials.secret_store import SecretStore
from keel.activities.credentials.user_tokens import SubjectAssertions, UserTokens
from keel.worker.config.local_secrets import local_secret
from keel.worker.config.settings import Settings

__all__ = [
    "LOCAL_KEY_ID",
    "credential_sealer",
    "secret_store",
    "subject_assertions",
    "user_tokens",
]

LOCAL_KEY_ID = "local"
LOCAL_KEY_FILE = "credential-key"
DEFAULT_ISSUER = "keel"


class CredentialKeyError(ValueError):
    """The configured payload keys cannot seal credentials."""


def credential_sealer(settings: Settings) -> Sealer:
    if not settings.payload_keys:
        secret = local_secret(settings.data_dir, LOCAL_KEY_FILE).get_secret_value()
        return Sealer({LOCAL_KEY_ID: hashlib.sha256(secret.encode()).digest()}, LOCAL_KEY_ID)
    keys: dict[str, bytes] = {}
    for key_id, value in settings.payload_keys.items():
        try:
            keys[key_id] = base64.b64decode(value.get_secret_value(), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise CredentialKeyError(
                f"Payload key {key_id!r} is not base64; make one with `keel keys new`."
            ) from exc
    current = settings.payload_key_id or next(iter(keys))
    return Sealer(keys, current)


def subject_assertions(settings: Settings) -> SubjectAssertions:
    secret = settings.jwt_secret or local_secret(settings.data_dir)
    return SubjectAssertions(secret, settings.jwt_issuer or DEFAULT_ISSUER)


def user_tokens(settings: Settings, pool: AsyncConnectionPool[Any]) -> UserTokens:
    """Users' tokens for the backends `KEEL_USER_CREDENTIALS` names, cached in `pool`."""
    return UserTokens(
        settings.user_credentials,
        CredentialStore(pool, credential_sealer(settings)),
        subject_assertions(settings),
    )


def secret_store(settings: Settings, pool: AsyncConnectionPool[Any]) -> SecretStore:
    return SecretStore(pool, credential_sealer(settings))
