"""Memories as users reach them: list and delete their own; admins purge a user's.

Every read and write is scoped to the caller's tenant and subject, so another
tenant's or another user's memory id answers like an id that never existed (404),
not "forbidden"; such an attempt is audited in the caller's tenant: another tenant's
as every surface audits one (`memory.cross_tenant_denied`), another user's as
`memory.access_denied`. Deleting and purging are audited (`memory.deleted`,
`memory.purged`, with the admin's tenant); a caller without the admin scope who asks
to purge is refused, and that is audited.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from keel.activities.store.audit import AuditEntry
from keel.activities.store.memory_store import Memory, MemoryStore, SearchMode
from keel.api.core.context import CoreParts
from keel.api.core.errors import Forbidden, NotFound
from keel.api.core.tenant_ids import in_view
from keel.api.identity.auth import Principal

__all__ = ["MemoriesPurged", "MemoryList", "MemoryPublic", "MemoryService"]


class MemoryPublic(BaseModel):
    """A remembered fact, with where it came from."""

    id: str
    fact: str = Field(description="What the user stated, as the model put it.")
    kind: str = Field(description="preference, decision, name or other.")
    topic: str = Field(description="What it is about; a later fact on the topic replaces it.")
    source_run_id: str = Field(description="The run it was learnt in (last restated in).")
    source_session_id: str | None = Field(description="That run's session, if it had one.")
    created_at: datetime
    updated_at: datetime = Field(description="When it was last stated or updated.")

    @classmethod
    def of(cls, memory: Memory) -> MemoryPublic:
        """The memory as its tenant knows its run and session: without their scope."""
        session = memory.source_session_id
        return cls.model_validate(
            {
                **memory.model_dump(),
                "source_run_id": in_view(memory.tenant_id, memory.source_run_id),
                "source_session_id": in_view(memory.tenant_id, session) if session else session,
            }
        )


class MemoryList(BaseModel):
    """The caller's memories, newest first (or best match first with `q`)."""

    memories: list[MemoryPublic]
    search: SearchMode = Field(description="How the database searches them: vector or text.")


class MemoriesPurged(BaseModel):
    """What an admin's purge removed."""

    tenant_id: str
    user: str
    deleted: int


class MemoryService:
    """The caller's own memories, and an admin's purge of a user's."""

    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts
        self._store = MemoryStore(parts.store.pool)

    async def list(self, user: Principal, *, limit: int, query: str | None = None) -> MemoryList:
        if query and query.strip():
            found = await self._store.search_text(user.tenant_id, user.subject, query, limit)
        else:
            found = await self._store.recent(user.tenant_id, user.subject, limit)
        return MemoryList(
            memories=[MemoryPublic.of(m) for m in found], search=await self._store.mode()
        )

    async def delete(self, memory_id: str, user: Principal) -> None:
        if not await self._store.delete(user.tenant_id, user.subject, memory_id, user.subject):
            # Someone else's id answers like one that never existed; the attempt is audited.
            holder = await self._store.held_elsewhere(user.tenant_id, user.subject, memory_id)
            if holder == "tenant":
                await self._parts.audit.cross_tenant(user, "memory", memory_id)
            elif holder == "user":
                await self._parts.audit.refusals.record(
                    AuditEntry(
                        tenant_id=user.tenant_id,
                        actor=user.subject,
                        category="tenancy",
                        action="memory.access_denied",
                        severity="warning",
                        subject=memory_id,
                        detail={"held_by": "another user"},
                    ),
                    source=f"{user.tenant_id}/{user.subject}",
                    reason="another user's memory",
                )
            raise NotFound(f"No memory {memory_id} of yours; list them with GET /v1/memories.")

    async def purge(
        self, subject: str, user: Principal, *, tenant_id: str | None
    ) -> MemoriesPurged:
        """Forget every memory of `subject` in a tenant (the admin's own by default)."""
        if not user.is_admin:
            await self._parts.audit.admin_refused(user, "memory.purge", "memories")
            raise Forbidden(
                "Purging a user's memories is for admins: it needs the keel:admin scope."
            )
        tenant = tenant_id or user.tenant_id
        deleted = await self._store.purge_user(tenant, subject, user.subject, user.tenant_id)
        return MemoriesPurged(tenant_id=tenant, user=subject, deleted=deleted)
