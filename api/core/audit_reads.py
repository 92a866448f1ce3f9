"""The audit log as the service shows and writes it: admins' reads, surfaces' refusals.

Surfaces never hold the log: they read it through `entries` and `verify` (admins
only), and report what they refused through `auth_refused` and `require_admin`, audited
(rate-limited) before the refusal is sent.
"""

from __future__ import annotations

from keel.activities.store.audit import AuditRecord, AuditVerification
from keel.api.core.context import CoreParts
from keel.api.core.errors import Forbidden
from keel.api.identity.auth import Principal

__all__ = ["AuditReads"]


class AuditReads:
    def __init__(self, parts: CoreParts) -> None:
        self._audit = parts.audit

    async def entries(
        self, tenant: str | None, user: Principal, *, after_id: int, limit: int
    ) -> list[AuditRecord]:
        """Audit rows in order; one tenant's chain or all of them (`_orphan` holds what
        no tenant could be known for)."""
        await self.require_admin(user, "audit.read", "audit")
        return await self._audit.log.entries(tenant, after_id=after_id, limit=limit)

    async def verify(self, tenant: str | None, user: Principal) -> AuditVerification:
        """Walk the hash chains: an edited, deleted or reordered row is reported."""
        await self.require_admin(user, "audit.verify", "audit")
        return await self._audit.log.verify(tenant)

    async def auth_refused(self, reason: str, path: str, client: str | None) -> None:
        """A credential a surface refused itself (a console cookie, a pasted token)."""
        await self._audit.auth_refused(reason, path, client)

    async def require_admin(self, user: Principal, action: str, path: str) -> None:
        """Refuse (`Forbidden`, audited first) a caller without the keel:admin scope."""
        if not user.is_admin:
            await self._audit.admin_refused(user, action, path)
            raise Forbidden("This endpoint needs the keel:admin scope.")
