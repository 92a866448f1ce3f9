"""Activities that mirror a run's interactions in Postgres, with events and audit."""

from __future__ import annotations

from temporalio import activity

from activities.interaction_store import InteractionStore
from workflows.models import OpenInteractionsInput, ResolveInteractionInput


class InteractionActivities:
    """`open_interactions` and `resolve_interaction`, idempotent on their keys."""

    def __init__(self, interactions: InteractionStore) -> None:
        self._interactions = interactions

    @activity.defn(name="open_interactions")
    async def open_interactions(self, request: OpenInteractionsInput) -> None:
        await self._interactions.open(
            run_id=request.run_id,
            tenant_id=request.tenant_id,
            interactions=request.interactions,
            event_seq=request.event_seq,
        )

    @activity.defn(name="resolve_interaction")
    async def resolve_interaction(self, request: ResolveInteractionInput) -> None:
        await self._interactions.resolve(
            run_id=request.run_id,
            tenant_id=request.tenant_id,
            session_id=request.session_id,
            interaction=request.interaction,
            new_rule=request.new_session_rule,
            event_seq=request.event_seq,
        )
