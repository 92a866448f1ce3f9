"""What the API writes to the audit log: refusals, cross-tenant attempts, admin reads.

Every refusal — a token that does not verify on any surface, a cross-tenant access, an
admin operation without the scope, an agent the caller's roles may not use — goes
through `RefusalLimiter`, so each is committed before the caller hears the refusal and
a flood of them is bounded (see `api.core.refusal_audit`). A refused token's tenant is
unknown (its claims are unverified), so it is filed under `ORPHAN_TENANT`, with the
tenant it claimed in its detail.
"""

from __future__ import annotations

from pydantic import JsonValue

from keel.activities.store.audit import AuditEntry, AuditLog
from keel.activities.store.orphan_tenant import ORPHAN_TENANT
from keel.api.core.refusal_audit import RefusalLimiter
from keel.api.identity.auth import Principal

__all__ = ["AUTH_REFUSALS_PER_WINDOW", "AUTH_REFUSAL_WINDOW_S", "ApiAudit"]

AUTH_REFUSALS_PER_WINDOW = 30
AUTH_REFUSAL_WINDOW_S = 60.0
# An unverified claim is kept only as a short label: it is whatever the sender wrote.
CLAIM_CHARS = 128


class ApiAudit:
    """Thin, named wrappers so every router audits the same way."""

    def __init__(
        self,
        log: AuditLog,
        *,
        refusals_per_window: int = AUTH_REFUSALS_PER_WINDOW,
        refusal_window_s: float = AUTH_REFUSAL_WINDOW_S,
    ) -> None:
        self.log = log
        self.refusals = RefusalLimiter(
            log, per_window=refusals_per_window, window_s=refusal_window_s
        )

    async def cross_tenant(self, user: Principal, kind: str, object_id: str) -> None:
        await self.refusals.record(
            AuditEntry(
                tenant_id=user.tenant_id,
                actor=user.subject,
                category="tenancy",
                action=f"{kind}.cross_tenant_denied",
                severity="warning",
                subject=object_id,
                detail={"kind": kind},
            ),
            source=f"{user.tenant_id}/{user.subject}",
            reason=kind,
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

    async def auth_refused(
        self,
        reason: str,
        path: str,
        client: str | None,
        *,
        claimed_tenant: str | None = None,
        provider: str | None = None,
    ) -> None:
        """A credential that did not verify, filed under the orphan tenant."""
        detail: dict[str, JsonValue] = {"reason": reason, "client": client}
        if claimed_tenant is not None:
            detail["claimed_tenant"] = claimed_tenant[:CLAIM_CHARS]
        if provider is not None:
            detail["provider"] = provider
        await self.refusals.record(
            AuditEntry(
                tenant_id=ORPHAN_TENANT,
                actor=None,
                category="auth",
                action="token.refused",
                severity="warning",
                subject=path,
                detail=detail,
            ),
            source=client or "unknown",
            reason=reason,
        )

    async def admin_refused(self, user: Principal, action: str, path: str) -> None:
        """A known caller without the admin scope asked for an admin operation."""
        await self.forbidden(user, f"{action}.refused", path, reason="needs the keel:admin scope")

    async def forbidden(
        self,
        user: Principal,
        action: str,
        subject: str,
        *,
        reason: str,
        detail: dict[str, JsonValue] | None = None,
    ) -> None:
        """A known caller refused something (403), recorded before the refusal is sent."""
        await self.refusals.record(
            AuditEntry(
                tenant_id=user.tenant_id,
                actor=user.subject,
                category="auth",
                action=action,
                severity="warning",
                subject=subject,
                detail={"reason": reason, **(detail or {})},
            ),
            source=f"{user.tenant_id}/{user.subject}",
            reason=reason,
        )
