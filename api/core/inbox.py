"""What waits for a person: the tenant's pending approvals and questions."""

from __future__ import annotations

from keel.api.core.context import CoreParts
from keel.api.core.schemas.interactions import InteractionPublic
from keel.api.identity.auth import Principal

__all__ = ["Inbox"]


class Inbox:
    def __init__(self, parts: CoreParts) -> None:
        self._interactions = parts.interactions

    async def pending(self, user: Principal, limit: int) -> list[InteractionPublic]:
        """Pending interactions across the caller's tenant's live runs, oldest first."""
        return [
            InteractionPublic.from_interaction(run_id, ia, tenant_id=user.tenant_id)
            for run_id, ia in await self._interactions.pending_for_tenant(user.tenant_id, limit)
        ]

    async def pending_by_tenant(self) -> dict[str, int]:
        """How many interactions wait, per tenant (the API's metrics)."""
        return await self._interactions.pending_by_tenant()
