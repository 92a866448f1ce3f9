"""The `masked_originals` table: sealed originals of masked tool arguments and outputs.

Rows are written once on `(run_id, step, ord, kind)`, before the masked copy is stored,
so a retried activity keeps the first and the model never finds a masked output whose
original is missing. What is stored is sealed already: this store never sees plaintext.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from keel.activities.store.store_pool import PooledStore

__all__ = ["OriginalKind", "OriginalsStore", "SealedOriginal"]

OriginalKind = Literal["tool_output", "tool_arguments"]

PUT_ORIGINAL_SQL = (
    "INSERT INTO masked_originals (run_id, step, ord, kind, tenant_id, call_id, tool,"
    " key_id, sealed) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
)
RUN_ORIGINALS_SQL = (
    "SELECT run_id, step, ord, kind, tenant_id, call_id, tool, key_id, sealed"
    " FROM masked_originals WHERE run_id = %s"
)
OUTPUT_AT_SQL = (
    "SELECT run_id, step, ord, kind, tenant_id, call_id, tool, key_id, sealed"
    " FROM masked_originals WHERE run_id = %s AND step = %s AND ord = %s"
    " AND kind = 'tool_output'"
)
CALL_ORIGINAL_SQL = (
    "SELECT run_id, step, ord, kind, tenant_id, call_id, tool, key_id, sealed"
    " FROM masked_originals WHERE run_id = %s AND step = %s AND call_id = %s AND kind = %s"
    " ORDER BY ord LIMIT 1"
)


class SealedOriginal(BaseModel):
    """One sealed original and where it belongs."""

    run_id: str
    step: int
    ord: int
    kind: OriginalKind
    tenant_id: str
    call_id: str
    tool: str
    key_id: str
    """The payload key whose derived key sealed it."""
    sealed: bytes
    """Nonce and AES-256-GCM ciphertext."""

    @property
    def place(self) -> str:
        """What the seal is bound to, so a row moved to another call does not open."""
        return f"{self.kind}:{self.run_id}/{self.step}/{self.ord}"


class OriginalsStore(PooledStore):
    async def put(self, original: SealedOriginal) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(
                PUT_ORIGINAL_SQL,
                (
                    original.run_id,
                    original.step,
                    original.ord,
                    original.kind,
                    original.tenant_id,
                    original.call_id,
                    original.tool,
                    original.key_id,
                    original.sealed,
                ),
            )

    async def of_run(self, run_id: str) -> list[SealedOriginal]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(RUN_ORIGINALS_SQL, (run_id,))
            return [SealedOriginal.model_validate(row) for row in await cur.fetchall()]

    async def output_at(self, run_id: str, step: int, ord_: int) -> SealedOriginal | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(OUTPUT_AT_SQL, (run_id, step, ord_))
            row = await cur.fetchone()
        return SealedOriginal.model_validate(row) if row else None

    async def of_call(
        self, run_id: str, step: int, call_id: str, kind: OriginalKind
    ) -> SealedOriginal | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(CALL_ORIGINAL_SQL, (run_id, step, call_id, kind))
            row = await cur.fetchone()
        return SealedOriginal.model_validate(row) if row else None
