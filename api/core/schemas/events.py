"""A run's events as clients page through them."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from keel.activities.store.records import EventRecord
from keel.api.core.tenant_ids import in_view_data


class EventPublic(BaseModel):
    seq: int
    type: str
    data: dict[str, object]
    created_at: datetime

    @classmethod
    def from_record(cls, event: EventRecord, tenant_id: str) -> EventPublic:
        """The event as the run's tenant knows it: the ids in its data without their scope."""
        data = in_view_data(tenant_id, event.data)
        return cls(seq=event.seq, type=event.type, data=data, created_at=event.created_at)


class EventPage(BaseModel):
    events: list[EventPublic]
    next_after: int = Field(description="Pass as `after` to get the events that follow.")
