"""The `run_texts` table: a run's system prompt and input, stored by content address."""

from __future__ import annotations

import json

from keel.activities.store.postgres_text import sha256_text
from keel.activities.store.store_pool import PooledStore

# Storing texts again marks them used now, so retention keeps texts a recent run uses.
INSERT_RUN_TEXTS_SQL = (
    "INSERT INTO run_texts (tenant_id, key, system_prompt, input)"
    " VALUES (%s, %s, %s, %s) ON CONFLICT (tenant_id, key) DO UPDATE SET created_at = now()"
)
SELECT_RUN_TEXTS_SQL = (
    "SELECT system_prompt, input FROM run_texts WHERE tenant_id = %s AND key = %s"
)


def texts_key(system_prompt: str, input: str) -> str:
    """Content address of a run's texts: the same texts always get the same key."""
    return sha256_text(json.dumps([system_prompt, input]))


class MissingRunTexts(LookupError):
    """A run's input points at texts that are not stored (for its tenant)."""


class RunTexts(PooledStore):
    """Runs' texts, so workflow histories carry a key instead of them."""

    async def put_run_texts(self, tenant_id: str, system_prompt: str, input: str) -> str:
        """Store a run's system prompt and input; returns the key a `RunInput` carries."""
        key = texts_key(system_prompt, input)
        async with self._pool.connection() as conn:
            await conn.execute(INSERT_RUN_TEXTS_SQL, (tenant_id, key, system_prompt, input))
        return key

    async def run_texts(self, tenant_id: str, key: str) -> tuple[str, str] | None:
        """The system prompt and input stored under `key` for the tenant, if any."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(SELECT_RUN_TEXTS_SQL, (tenant_id, key))
            row = await cur.fetchone()
        return (row["system_prompt"], row["input"]) if row else None
