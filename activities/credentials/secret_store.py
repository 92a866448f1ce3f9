"""Secrets users give in answer to `secret_ref` interactions, sealed, by reference.

The API seals the value and hands the run only its reference (`secret:<hex>`); the
activity that needs the value takes it by that reference, within the run and tenant it
was given for, and the row is deleted once it is used.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from psycopg_pool import AsyncConnectionPool

from keel.activities.credentials.sealing import Sealer
from keel.workflows.interactions.models import SECRET_REF_PATTERN

INSERT_SECRET_SQL = (
    "INSERT INTO secret_refs (id, tenant_id, run_id, interaction_id, sealed)"
    " VALUES (%s, %s, %s, %s, %s)"
)
SELECT_SECRET_SQL = (
    "SELECT interaction_id, sealed FROM secret_refs"
    " WHERE id = %s AND tenant_id = %s AND run_id = %s"
)
DELETE_SECRET_SQL = "DELETE FROM secret_refs WHERE id = %s"
DELETE_RUN_SECRETS_SQL = "DELETE FROM secret_refs WHERE run_id = %s"

SECRET_REF = re.compile(SECRET_REF_PATTERN)
# A secret is a token, a password or a one-time code, not a document.
MAX_SECRET_CHARS = 8_192


def is_secret_ref(text: str | None) -> bool:
    return text is not None and SECRET_REF.match(text) is not None


class SecretStore:
    def __init__(self, pool: AsyncConnectionPool[Any], sealer: Sealer) -> None:
        self._pool = pool
        self._sealer = sealer

    async def put(self, tenant_id: str, run_id: str, interaction_id: str, value: str) -> str:
        """Seal `value` for this interaction; the reference the run may hold."""
        ref = f"secret:{secrets.token_hex(16)}"
        sealed = self._sealer.seal(value, _bound(ref, tenant_id, run_id, interaction_id))
        async with self._pool.connection() as conn:
            await conn.execute(INSERT_SECRET_SQL, (ref, tenant_id, run_id, interaction_id, sealed))
        return ref

    async def get(self, ref: str, tenant_id: str, run_id: str) -> str | None:
        """The value behind `ref` if it was given for this run of this tenant."""
        if not is_secret_ref(ref):
            return None
        async with self._pool.connection() as conn:
            row = await (await conn.execute(SELECT_SECRET_SQL, (ref, tenant_id, run_id))).fetchone()
        if row is None:
            return None
        bound = _bound(ref, tenant_id, run_id, row["interaction_id"])
        return self._sealer.open(bytes(row["sealed"]), bound)

    async def discard(self, ref: str) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(DELETE_SECRET_SQL, (ref,))


def _bound(*where: str) -> str:
    return "secret_refs\x00" + "\x00".join(where)
