"""Memories in Postgres: per tenant and user, searched by pgvector or full-text search.

Migration 019 adds the `embedding` column only where pgvector is installed; the store
looks once which it has. Every read and write names the tenant and the user, so
another tenant's or user's memory is never found, only unknown.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from keel.activities.memory.dedupe import KnownMemory, fact_hash
from keel.activities.store.audit import AuditEntry, AuditLog
from keel.activities.store.event_rows import put_event_in
from keel.activities.store.postgres_text import sha256_text, storable

__all__ = ["Memory", "MemoryStore", "SearchMode", "StoredFact"]

SearchMode = Literal["vector", "text"]

# How many of a user's memories placing a new fact compares it with (newest first).
KNOWN_LIMIT = 500
# The recalled memories note is the run's third opening message (after system, input).
RECALL_STEP, RECALL_ORD = 0, 2

MEMORY_COLUMNS = (
    "id, tenant_id, user_id, fact, kind, topic, source_run_id, source_session_id,"
    " created_at, updated_at"
)
HAS_EMBEDDING_SQL = (
    "SELECT 1 FROM information_schema.columns"
    " WHERE table_name = 'memories' AND column_name = 'embedding'"
    " AND table_schema = current_schema()"
)
LIST_SQL = (
    f"SELECT {MEMORY_COLUMNS} FROM memories WHERE tenant_id = %s AND user_id = %s"
    " ORDER BY updated_at DESC, id LIMIT %s"
)
# OR of the query's lexemes: a question shares some words with a fact, rarely all.
TEXT_SEARCH_SQL = (
    f"WITH q AS (SELECT replace(plainto_tsquery('english', %s)::text, '&', '|') AS t)"
    f" SELECT {MEMORY_COLUMNS}, ts_rank(tsv, to_tsquery('english', q.t)) AS score"
    " FROM memories, q WHERE tenant_id = %s AND user_id = %s AND q.t <> ''"
    " AND tsv @@ to_tsquery('english', q.t)"
    " ORDER BY score DESC, updated_at DESC LIMIT %s"
)
VECTOR_SEARCH_SQL = (
    f"SELECT {MEMORY_COLUMNS}, 1 - (embedding <=> %s::vector) AS score FROM memories"
    " WHERE tenant_id = %s AND user_id = %s AND embedding_model = %s"
    " AND embedding IS NOT NULL AND vector_dims(embedding) = %s"
    " ORDER BY embedding <=> %s::vector LIMIT %s"
)
KNOWN_SQL = (
    "SELECT id, fact, kind, topic{embedding} FROM memories WHERE tenant_id = %s AND user_id = %s"
    " ORDER BY updated_at DESC LIMIT %s"
)
INSERT_SQL = (
    "INSERT INTO memories (tenant_id, id, user_id, fact, kind, topic, fact_hash,"
    " source_run_id, source_session_id, embedding_model{embedding_column})"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s{embedding_value})"
    " ON CONFLICT (tenant_id, user_id, fact_hash) DO NOTHING RETURNING id"
)
UPDATE_SQL = (
    "UPDATE memories SET fact = %s, kind = %s, topic = %s, fact_hash = %s, source_run_id = %s,"
    " source_session_id = %s, embedding_model = %s, updated_at = now(){embedding_set}"
    " WHERE tenant_id = %s AND user_id = %s AND id = %s"
    " AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = %s AND m.user_id = %s"
    " AND m.fact_hash = %s AND m.id <> %s)"
)
TOUCH_SQL = (
    "UPDATE memories SET updated_at = now(), source_run_id = %s, source_session_id = %s"
    " WHERE tenant_id = %s AND user_id = %s AND id = %s"
)
DELETE_SQL = "DELETE FROM memories WHERE tenant_id = %s AND user_id = %s AND id = %s"
HELD_ELSEWHERE_SQL = (
    "SELECT tenant_id = %s AS same_tenant FROM memories WHERE id = %s"
    " AND NOT (tenant_id = %s AND user_id = %s) LIMIT 1"
)
PURGE_USER_SQL = "DELETE FROM memories WHERE tenant_id = %s AND user_id = %s"
EXTRACTION_SQL = (
    "SELECT proposed, stored, updated, withheld FROM memory_extractions WHERE run_id = %s"
)
# Claimed first, so of two overlapping attempts only one applies anything: the other
# waits on the row's key until the first commits, then finds it taken.
CLAIM_EXTRACTION_SQL = (
    "INSERT INTO memory_extractions (run_id, tenant_id, user_id, proposed, stored, updated,"
    " withheld) VALUES (%s, %s, %s, %s, 0, 0, %s) ON CONFLICT (run_id) DO NOTHING"
    " RETURNING run_id"
)
RECORD_EXTRACTION_SQL = "UPDATE memory_extractions SET stored = %s, updated = %s WHERE run_id = %s"
# The extraction's tokens and cost count on the run, as its model calls' do.
ADD_USAGE_SQL = (
    "UPDATE runs SET prompt_tokens = prompt_tokens + %s,"
    " completion_tokens = completion_tokens + %s, cost_usd = cost_usd + %s WHERE id = %s"
)
INSERT_NOTE_SQL = (
    "INSERT INTO messages (run_id, step, ord, role, content, sha256)"
    " VALUES (%s, %s, %s, 'system', %s, %s) ON CONFLICT DO NOTHING"
)


class Memory(BaseModel):
    """One remembered fact and where it came from."""

    id: str
    tenant_id: str
    user_id: str
    fact: str
    kind: str
    topic: str
    source_run_id: str
    source_session_id: str | None
    created_at: datetime
    updated_at: datetime
    score: float | None = None
    """How well it matched a search (cosine similarity or text rank); None when listed."""


class StoredFact(BaseModel):
    """A fact to write: new (`replaces` None) or over a similar memory."""

    fact: str
    kind: str
    topic: str
    replaces: str | None = None
    duplicate_of: str | None = None
    embedding: list[float] | None = None


class ExtractionCounts(BaseModel):
    proposed: int = 0
    stored: int = 0
    updated: int = 0
    withheld: int = 0
    earlier: bool = False
    """An earlier attempt had recorded the extraction: these are its counts, and nothing
    (facts, audits, usage) was applied again."""


class MemoryStore:
    """The `memories` table, and the note of recalled memories in a run's conversation."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool
        self._mode: SearchMode | None = None

    async def mode(self) -> SearchMode:
        """`vector` where migration 019 found pgvector, else `text` (asked once)."""
        if self._mode is None:
            async with self._pool.connection() as conn:
                cur = await conn.execute(HAS_EMBEDDING_SQL)
                self._mode = "vector" if await cur.fetchone() else "text"
        return self._mode

    async def recent(self, tenant_id: str, user_id: str, limit: int) -> list[Memory]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(LIST_SQL, (tenant_id, user_id, limit))
            return [Memory.model_validate(row) for row in await cur.fetchall()]

    async def search_text(
        self, tenant_id: str, user_id: str, query: str, limit: int
    ) -> list[Memory]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(TEXT_SEARCH_SQL, (query, tenant_id, user_id, limit))
            return [Memory.model_validate(row) for row in await cur.fetchall()]

    async def search_vector(
        self, tenant_id: str, user_id: str, embedding: Sequence[float], model: str, limit: int
    ) -> list[Memory]:
        vector = _vector(embedding)
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                VECTOR_SEARCH_SQL,
                (vector, tenant_id, user_id, model, len(embedding), vector, limit),
            )
            return [Memory.model_validate(row) for row in await cur.fetchall()]

    async def known(self, tenant_id: str, user_id: str, model: str | None) -> list[KnownMemory]:
        """The user's newest memories, with their embeddings where they have one of `model`."""
        vector = await self.mode() == "vector" and model is not None
        column = ", embedding::text AS embedding, embedding_model" if vector else ""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                KNOWN_SQL.format(embedding=column), (tenant_id, user_id, KNOWN_LIMIT)
            )
            rows = await cur.fetchall()
        known: list[KnownMemory] = []
        for row in rows:
            embedding = None
            if vector and row["embedding"] and row["embedding_model"] == model:
                embedding = tuple(float(x) for x in json.loads(row["embedding"]))
            known.append(
                KnownMemory(
                    id=row["id"],
                    fact=row["fact"],
                    kind=row["kind"],
                    topic=row["topic"],
                    embedding=embedding,
                )
            )
        return known

    async def extraction(self, run_id: str) -> ExtractionCounts | None:
        """What an earlier attempt of this run's extraction stored, if one finished."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(EXTRACTION_SQL, (run_id,))
            row = await cur.fetchone()
        return ExtractionCounts.model_validate(row) if row else None

    async def store_facts(
        self,
        *,
        tenant_id: str,
        user_id: str,
        run_id: str,
        session_id: str | None,
        facts: Sequence[StoredFact],
        embedding_model: str | None,
        counts: ExtractionCounts,
        tokens: Sequence[int] = (),
        cost_usd: float = 0.0,
    ) -> ExtractionCounts:
        """Record the extraction, write the facts, audit each and add its usage to the
        run's, in one transaction; an attempt that finds the extraction recorded applies
        nothing and answers the recorded counts."""
        vector = await self.mode() == "vector"
        stored = updated = 0
        async with self._pool.connection() as conn, conn.transaction():
            claimed = await conn.execute(
                CLAIM_EXTRACTION_SQL,
                (run_id, tenant_id, user_id, counts.proposed, counts.withheld),
            )
            if await claimed.fetchone() is None:
                recorded = await (await conn.execute(EXTRACTION_SQL, (run_id,))).fetchone()
                assert recorded is not None, "a claimed extraction is never deleted"
                return ExtractionCounts.model_validate({**recorded, "earlier": True})
            for fact in facts:
                with_vector = vector and fact.embedding is not None
                model = embedding_model if with_vector else None
                if fact.duplicate_of is not None:
                    await conn.execute(
                        TOUCH_SQL, (run_id, session_id, tenant_id, user_id, fact.duplicate_of)
                    )
                    continue
                digest = fact_hash(fact.fact)
                # The columns an insert and an update both write, in their SQL's order.
                fact_columns = (
                    storable(fact.fact),
                    fact.kind,
                    storable(fact.topic),
                    digest,
                    run_id,
                    session_id,
                    model,
                    *([_vector(fact.embedding or [])] if with_vector else []),
                )
                if fact.replaces is not None:
                    cur = await conn.execute(
                        UPDATE_SQL.format(
                            embedding_set=", embedding = %s::vector" if with_vector else ""
                        ),
                        (
                            *fact_columns,
                            tenant_id,
                            user_id,
                            fact.replaces,
                            tenant_id,
                            user_id,
                            digest,
                            fact.replaces,
                        ),
                    )
                    if cur.rowcount:
                        updated += 1
                        await AuditLog.append_in(
                            conn,
                            _entry(tenant_id, user_id, "memory.updated", fact.replaces, run_id),
                        )
                    continue
                memory_id = f"mem-{uuid.uuid4().hex[:16]}"
                cur = await conn.execute(
                    INSERT_SQL.format(
                        embedding_column=", embedding" if with_vector else "",
                        embedding_value=", %s::vector" if with_vector else "",
                    ),
                    (tenant_id, memory_id, user_id, *fact_columns),
                )
                if await cur.fetchone():
                    stored += 1
                    await AuditLog.append_in(
                        conn, _entry(tenant_id, user_id, "memory.stored", memory_id, run_id)
                    )
            done = counts.model_copy(update={"stored": stored, "updated": updated})
            await conn.execute(RECORD_EXTRACTION_SQL, (stored, updated, run_id))
            if tokens:
                await conn.execute(ADD_USAGE_SQL, (tokens[0], tokens[1], cost_usd, run_id))
        return done

    async def delete(self, tenant_id: str, user_id: str, memory_id: str, actor: str) -> bool:
        """Forget one memory of the user; False if the user has none by that id."""
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(DELETE_SQL, (tenant_id, user_id, memory_id))
            if not cur.rowcount:
                return False
            await AuditLog.append_in(
                conn,
                AuditEntry(
                    tenant_id=tenant_id,
                    actor=actor,
                    category="memory",
                    action="memory.deleted",
                    subject=memory_id,
                    detail={"user": user_id},
                ),
            )
        return True

    async def held_elsewhere(
        self, tenant_id: str, user_id: str, memory_id: str
    ) -> Literal["user", "tenant"] | None:
        """Who else holds a memory id the caller asked for: another `user` of the caller's
        tenant, another `tenant`, or nobody (None). The caller is told only that the id is
        unknown either way."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(HELD_ELSEWHERE_SQL, (tenant_id, memory_id, tenant_id, user_id))
            row = await cur.fetchone()
        if row is None:
            return None
        return "user" if row["same_tenant"] else "tenant"

    async def purge_user(self, tenant_id: str, user_id: str, actor: str, admin_tenant: str) -> int:
        """Forget every memory of a user in a tenant; audited with the count and the tenant
        of the admin who asked."""
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(PURGE_USER_SQL, (tenant_id, user_id))
            count = cur.rowcount
            await AuditLog.append_in(
                conn,
                AuditEntry(
                    tenant_id=tenant_id,
                    actor=actor,
                    category="memory",
                    action="memory.purged",
                    severity="warning",
                    subject=user_id,
                    detail={"deleted": count, "admin_tenant": admin_tenant},
                ),
            )
        return count

    async def put_recall_note(
        self, run_id: str, content: str | None, event_seq: int, event: dict[str, object]
    ) -> None:
        """The recalled memories as the run's third opening message (if any), and its event."""
        async with self._pool.connection() as conn, conn.transaction():
            if content is not None:
                content = storable(content)
                await conn.execute(
                    INSERT_NOTE_SQL,
                    (run_id, RECALL_STEP, RECALL_ORD, content, sha256_text(content)),
                )
            await put_event_in(conn, run_id, event_seq, "memory", event)


def _vector(values: Sequence[float]) -> str:
    """pgvector's text form, `[0.1,0.2]`: no client-side adapter needed."""
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


def _entry(tenant_id: str, user_id: str, action: str, memory_id: str, run_id: str) -> AuditEntry:
    # The fact itself stays out of the append-only log: deleting a memory must forget it.
    return AuditEntry(
        tenant_id=tenant_id,
        actor=user_id,
        category="memory",
        action=action,
        subject=memory_id,
        detail={"run_id": run_id},
    )
