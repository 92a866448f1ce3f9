"""What the API writes to the audit log: refusals, cross-tenant attempts, admin reads."""

from __future__ import annotations

import time
from collections import deque

from keel.activities.store.audit import AuditEntry, AuditLog
from keel.api.identity.auth import Principal

AUTH_REFUSALS_PER_MINUTE = 30


class ApiAudit:
    """Thin, named wrappers so every router audits the same way."""

    def __init__(self, log: AuditLog) -> None:
        self.log = log
        self._refusals: dict[str | None, deque[float]] = {}
        self._suppressed = 0

    def _refusal_allowed(self, client: str | None) -> bool:
        """Anyone can send bad tokens: audit at most a few a minute per client."""
        now = time.monotonic()
        window = self._refusals.setdefault(client, deque())
        while window and now - window[0] > 60:
            window.popleft()
        if len(window) >= AUTH_REFUSALS_PER_MINUTE:
            self._suppressed += 1
            return False
        window.append(now)
        if len(self._refusals) > 10_000:
            self._refusals.clear()
        return True

    async def cross_tenant(self, user: Principal, kind: str, object_id: str) -> None:
        await self.log.append(
            AuditEntry(
                tenant_id=user.tenant_id,
                actor=user.subject,
                category="tenancy",
                action=f"{kind}.cross_tenant_denied",
                severity="warning",
                subject=object_id,
                detail={"kind": kind},
            )
        )

    async def refused_decision(
        self, user: Principal, run_id: str, interaction_id: str, decision: str, reason: str
    ) -> None:
        await self.log.append(
            AuditEntry(
                tenant_id=user.tenant_id,
                actor=user.subject,
                category="approval",
                action="decision.refused",
                severity="warning",
                subject=f"{run_id}/{interaction_id}",
                detail={"decision": decision, "reason": reason},
            )
        )

    async def auth_refused(self, reason: str, path: str, client: str | None) -> None:
        if not self._refusal_allowed(client):
            return
        suppressed, self._suppressed = self._suppressed, 0
        await self.log.append(
            AuditEntry(
                tenant_id=None,
                actor=None,
                category="auth",
                action="token.refused",
                severity="warning",
                subject=path,
                detail={"reason": reason, "client": client, "suppressed_before": suppressed},
            )
        )

    async def admin_refused(self, user: Principal, action: str, path: str) -> None:
        """A known caller without the admin scope asked for an admin operation."""
        if not self._refusal_allowed(f"{user.tenant_id}/{user.subject}"):
            return
        await self.log.append(
            AuditEntry(
                tenant_id=user.tenant_id,
                actor=user.subject,
                category="auth",
                action=f"{action}.refused",
                severity="warning",
                subject=path,
                detail={"reason": "needs the keel:admin scope"},
            )
        )
