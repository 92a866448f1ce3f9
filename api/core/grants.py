"""Grants as users reach them: made with an `approve_always`, listed, revoked.

A grant is stored by the run whose approval made it (`resolve_interaction`), in the
transaction's wake, once per decision. This module checks what only the API can know
before the decision goes to the run (an `agent` grant by someone who is neither the
user nor an admin, an `until` already past on the wall clock), tells the other runs a
grant covers that it was made or revoked (the `grants_changed` signal), and hands a
run about to start the grants that cover it. Revoking is idempotent and audited;
another tenant's grant is a 404, audited like every cross-tenant attempt.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from temporalio.service import RPCError

from keel.activities.store.audit import AuditEntry
from keel.activities.store.grant_store import GrantRecord, GrantStore
from keel.api.core.context import TEMPORAL_CALL_TIMEOUT, CoreParts
from keel.api.core.errors import Forbidden, Invalid, KeelError, NotFound
from keel.api.core.schemas.grants import GrantList, GrantPublic, GrantScopeCreate
from keel.api.identity.auth import Principal
from keel.api.identity.config import user_ref
from keel.workflows.gate.grants import GrantChange
from keel.workflows.interactions.models import Interaction
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.models import RunInput

__all__ = ["GrantService"]

MAX_LISTED = 500


class GrantService:
    """The tenant's grants: list, revoke, and the runs that must hear of them."""

    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts
        self._store = GrantStore(parts.store.pool)

    def refusal(
        self, scope: GrantScopeCreate, interaction: Interaction, user: Principal, decision: str
    ) -> KeelError | None:
        """What the API refuses before the run sees the decision (the run checks the rest:
        who may approve, the pattern against the call and the agent's deny rules)."""
        if decision != "approve_always":
            return Invalid("A grant's scope goes with `approve_always`.", field="grant")
        if scope.until is not None:
            if scope.until.tzinfo is None:
                return Invalid(
                    "The grant's `until` needs a time zone (for example 2026-12-31T18:00:00Z).",
                    field="grant.until",
                )
            if scope.until <= datetime.now(UTC):
                return Invalid(
                    f"The grant's `until` ({scope.until.isoformat()}) is not in the future.",
                    field="grant.until",
                )
        if scope.kind == "agent" and not (user_ref(user) == interaction.requester or user.is_admin):
            return Forbidden(
                f"Only {interaction.requester} themselves or an admin may grant "
                f"{interaction.tool} for every run of this agent; choose the run or the "
                "session instead."
            )
        return None

    async def list(self, user: Principal, *, include_ended: bool = False) -> GrantList:
        """The caller's tenant's grants, newest first (live ones unless `include_ended`)."""
        rows = await self._store.of_tenant(
            user.tenant_id, include_ended=include_ended, limit=MAX_LISTED
        )
        now = datetime.now(UTC)
        return GrantList(grants=[GrantPublic.of(row, now) for row in rows])

    async def get(self, grant_id: str, user: Principal) -> GrantPublic:
        return GrantPublic.of(await self._own(grant_id, user), datetime.now(UTC))

    async def revoke(self, grant_id: str, user: Principal) -> GrantPublic:
        """Revoke a grant: the runs it covers stop honouring it at their next call.

        Revoking a revoked grant answers with it as it is (and tells the runs again)."""
        grant = await self._own(grant_id, user)
        me = user_ref(user)
        if not (me in (grant.granted_by, grant.user_ref) or user.is_admin):
            reason = (
                f"Only {grant.granted_by} (who granted it), {grant.user_ref} or an admin may "
                f"revoke grant {grant.id}."
            )
            await self._audit(user, "grant.revoke_refused", grant, {"reason": reason})
            raise Forbidden(reason)
        revoked = await self._store.revoke(grant.id, user.tenant_id, me)
        if revoked is not None:
            await self._audit(user, "grant.revoked", revoked, {"revoked_by": me})
            grant = revoked
        else:
            grant = await self._own(grant_id, user)
        await self.announce(grant, GrantChange(revoked=[grant.id]))
        return GrantPublic.of(grant, datetime.now(UTC))

    async def made(self, grant_id: str, tenant_id: str, besides: str) -> GrantPublic | None:
        """A decision made this grant: the other runs it covers take it at their next call."""
        grant = await self._store.get(grant_id, tenant_id)
        if grant is None:
            return None
        await self.announce(grant, GrantChange(added=[grant.live()]), besides=besides)
        return GrantPublic.of(grant, datetime.now(UTC))

    async def with_grants(self, run: RunInput) -> RunInput:
        """The run about to start, with the live grants that cover it."""
        grants = await self._store.for_new_run(
            run.tenant_id, run.session_id, run.agent.name, run.requester
        )
        return run.model_copy(update={"grants": grants}) if grants else run

    async def announce(
        self, grant: GrantRecord, change: GrantChange, *, besides: str | None = None
    ) -> None:
        """Signal every run still going that `grant` covers; one that has ended is skipped."""
        runs = [r for r in await self._store.runs_covered(grant) if r != besides]
        await asyncio.gather(*(self._signal(run_id, change) for run_id in runs))

    async def _signal(self, run_id: str, change: GrantChange) -> None:
        handle = self._parts.temporal.get_workflow_handle_for(AgentRunWorkflow.run, run_id)
        try:
            await handle.signal(
                AgentRunWorkflow.grants_changed, change, rpc_timeout=TEMPORAL_CALL_TIMEOUT
            )
        except RPCError:
            pass  # ended meanwhile, or not started yet: it reads the grants when it starts

    async def _own(self, grant_id: str, user: Principal) -> GrantRecord:
        grant = await self._store.get(grant_id, user.tenant_id)
        if grant is not None:
            return grant
        if await self._store.exists(grant_id):
            await self._parts.audit.cross_tenant(user, "grant", grant_id)
        raise NotFound(f"No grant {grant_id}.")

    async def _audit(
        self, user: Principal, action: str, grant: GrantRecord, extra: dict[str, str]
    ) -> None:
        await self._parts.audit.log.append(
            AuditEntry(
                tenant_id=user.tenant_id,
                actor=user.subject,
                category="approval",
                action=action,
                severity="warning" if action.endswith("refused") else "info",
                subject=f"grant/{grant.id}",
                detail={
                    "kind": grant.kind,
                    "permission": grant.permission,
                    "pattern": grant.pattern,
                    **extra,
                },
            )
        )
