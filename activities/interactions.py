"""Activities that mirror a run's interactions in Postgres, with events and audit."""

from __future__ import annotations

from temporalio import activity

from keel.activities.store.audit import AuditEntry, AuditLog
from keel.activities.store.interaction_store import InteractionStore
from keel.workflows.activity_refs import InteractionRecords
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

    def __init__(self, interactions: InteractionStore, audit: AuditLog) -> None:
        self._interactions = interactions
        self._audit = audit

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
        if took:
            await self._audit_resolution(request)
        return ResolveInteractionResult(interaction=stored)

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
        return SessionRulesResult(rules=await self._interactions.session_rules(request.session_id))
