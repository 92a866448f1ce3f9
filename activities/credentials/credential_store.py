"""Users' tokens for tool backends in Postgres, sealed, per (tenant, user, backend)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from keel.activities.credentials.sealing import Sealer

SELECT_CREDENTIAL_SQL = (
    "SELECT access_token, access_expires_at, refresh_token, updated_at FROM user_credentials"
    " WHERE tenant_id = %s AND user_ref = %s AND backend = %s"
)
UPSERT_CREDENTIAL_SQL = (
    "INSERT INTO user_credentials"
    " (tenant_id, user_ref, backend, access_token, access_expires_at, refresh_token)"
    " VALUES (%s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (tenant_id, user_ref, backend) DO UPDATE SET"
    " access_token = EXCLUDED.access_token, access_expires_at = EXCLUDED.access_expires_at,"
    " refresh_token = COALESCE(EXCLUDED.refresh_token, user_credentials.refresh_token),"
    " updated_at = now()"
)
DELETE_CREDENTIAL_SQL = (
    "DELETE FROM user_credentials WHERE tenant_id = %s AND user_ref = %s AND backend = %s"
)


class UserCredential(BaseModel):
    """A user's credential for one backend, opened."""

    access_token: str | None = None
    expires_at: datetime | None = None
    """None: the token has no known expiry (a personal token the user gave)."""
    refresh_token: str | None = None
    issued_at: datetime | None = None
    """When the access token was stored (read back only)."""


class CredentialStore:
    def __init__(self, pool: AsyncConnectionPool[Any], sealer: Sealer) -> None:
        self._pool = pool
        self._sealer = sealer

    async def get(self, tenant_id: str, user: str, backend: str) -> UserCredential | None:
        async with self._pool.connection() as conn:
            row = await (
                await conn.execute(SELECT_CREDENTIAL_SQL, (tenant_id, user, backend))
            ).fetchone()
        if row is None:
            return None
        return UserCredential(
            access_token=self._open(row["access_token"], tenant_id, user, backend, "access"),
            expires_at=row["access_expires_at"],
            issued_at=row["updated_at"],
            refresh_token=self._open(row["refresh_token"], tenant_id, user, backend, "refresh"),
        )

    async def put(
        self, tenant_id: str, user: str, backend: str, credential: UserCredential
    ) -> None:
        """Store the access token; a refresh token of None keeps the one stored."""
        values = (
            tenant_id,
            user,
            backend,
            self._seal(credential.access_token, tenant_id, user, backend, "access"),
            credential.expires_at,
            self._seal(credential.refresh_token, tenant_id, user, backend, "refresh"),
        )
        async with self._pool.connection() as conn:
            await conn.execute(UPSERT_CREDENTIAL_SQL, values)

    async def forget(self, tenant_id: str, user: str, backend: str) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(DELETE_CREDENTIAL_SQL, (tenant_id, user, backend))

    def _seal(self, value: str | None, *where: str) -> bytes | None:
        return None if value is None else self._sealer.seal(value, _bound(*where))

    def _open(self, sealed: bytes | None, *where: str) -> str | None:
        return None if sealed is None else self._sealer.open(bytes(sealed), _bound(*where))


def _bound(*where: str) -> str:
    return "user_credentials\x00" + "\x00".join(where)
