"""Activities that mirror a run's interactions in Postgres, with events and audit."""

from __future__ import annotations

from temporalio import activity

from keel.activities.store.audit import AuditEntry, AuditLog
from keel.activities.store.grant_store import GrantStore
from keel.activities.store.interaction_store import InteractionStore
from keel.workflows.activity_refs import InteractionRecords
from keel.workflows.gate.grants import LiveGrant, NewGrant
from keel.workflows.interactions.models import (
    Interaction,
    OpenInteractionsInput,
    ResolveInteractionInput,
    ResolveInteractionResult,
)
from keel.workflows.sessions.models import SessionRulesInput, SessionRulesResult


def _detail(ia: Interaction) -> dict[str, object]:
    return {
        "kind": ia.kind,
        "tool": ia.tool,
        "subject": ia.subject,
        "risk": ia.risk,
        "payload_hash": ia.payload_hash,
        "approvers": list(ia.approvers),
        "expires_at": ia.expires_at.isoformat(),
    }


class InteractionActivities(InteractionRecords):
    """`open_interactions` and `resolve_interaction`, idempotent on their keys."""

    def __init__(
        self, interactions: InteractionStore, audit: AuditLog, grants: GrantStore | None = None
    ) -> None:
        self._interactions = interactions
        self._audit = audit
        self._grants = grants or GrantStore(interactions.pool)

    @activity.defn(name="open_interactions")
    async def open_interactions(self, request: OpenInteractionsInput) -> None:
        await self._interactions.open(
            run_id=request.run_id,
            tenant_id=request.tenant_id,
            interactions=request.interactions,
            event_seq=request.event_seq,
        )
        for ia in request.interactions:
            await self._audit.append_once(
                AuditEntry(
                    tenant_id=request.tenant_id,
                    actor=ia.requester,
                    category="approval",
                    action="interaction.requested",
                    subject=f"{request.run_id}/{ia.id}",
                    detail=_detail(ia),  # type: ignore[arg-type]
                ),
            )

    @activity.defn(name="resolve_interaction")
    async def resolve_interaction(
        self, request: ResolveInteractionInput
    ) -> ResolveInteractionResult:
        """Store a decision or expiry unless another took first; audit only the one that took."""
        stored, took = await self._interactions.resolve(
            run_id=request.run_id,
            tenant_id=request.tenant_id,
            session_id=request.session_id,
            interaction=request.interaction,
            new_rule=request.new_session_rule,
            event_seq=request.event_seq,
        )
        grant = None
        if took:
            await self._audit_resolution(request)
            if request.new_grant is not None:
                grant = await self._record_grant(request, request.new_grant)
        return ResolveInteractionResult(interaction=stored, grant=grant)

    async def _record_grant(self, request: ResolveInteractionInput, new: NewGrant) -> LiveGrant:
        """Store the decision's grant once, and audit it once (a retry finds both)."""
        stored, _ = await self._grants.record(request.tenant_id, new)
        await self._audit.append_once(
            AuditEntry(
                tenant_id=request.tenant_id,
                actor=stored.granted_by,
                category="approval",
                action="grant.created",
                subject=f"grant/{stored.id}",
                detail={
                    "kind": stored.kind,
                    "permission": stored.permission,
                    "pattern": stored.pattern,
                    "until": stored.until.isoformat() if stored.until else None,
                    "run_id": stored.run_id,
                    "session_id": stored.session_id,
                    "agent": stored.agent,
                    "user": stored.user_ref,
                    "interaction_id": stored.interaction_id,
                },
            ),
        )
        return stored.live()

    async def _audit_resolution(self, request: ResolveInteractionInput) -> None:
        ia = request.interaction
        expired = ia.status == "expired"
        action = f"interaction.{ia.status}"
        detail = _detail(ia) | {
            "decision": ia.decision,
            "decided_by": "timer" if expired else "human",
            "decided_at": ia.decided_at.isoformat() if ia.decided_at else None,
        }
        if request.new_session_rule is not None:
            detail["session_rule"] = request.new_session_rule.model_dump()
        if ia.approved_hash is not None:  # approved with edits: what was proposed, what runs
            detail |= {
                "edited_by": ia.decided_by,
                "proposed_hash": ia.payload_hash,
                "approved_hash": ia.approved_hash,
                "proposed_arguments": ia.arguments,
                "approved_arguments": ia.approved_arguments,
            }
        await self._audit.append_once(
            AuditEntry(
                tenant_id=request.tenant_id,
                actor="timer" if expired else ia.decided_by,
                category="approval",
                action=action,
                severity="warning" if expired else "info",
                subject=f"{request.run_id}/{ia.id}",
                detail=detail,  # type: ignore[arg-type]
            ),
        )

    @activity.defn(name="session_rules")
    async def session_rules(self, request: SessionRulesInput) -> SessionRulesResult:
        grants = []
        if request.tenant_id is not None and request.agent and request.requester:
            grants = await self._grants.for_new_run(
                request.tenant_id, request.session_id, request.agent, request.requester
            )
        return SessionRulesResult(
            rules=await self._interactions.session_rules(request.session_id), grants=grants
        )
