"""The CLI's client for /v1/schedules, on top of `KeelClient`."""

from __future__ import annotations

from keel.api.cli.client import KeelClient
from keel.api.core.schedules.schemas import (
    BackfillOverlap,
    ScheduleBackfillAccepted,
    ScheduleBackfillCreate,
    ScheduleCreate,
    ScheduleList,
    SchedulePublic,
    ScheduleTriggered,
    ScheduleUpdate,
)
from keel.api.core.schemas.runs import RunList


class ScheduleClient(KeelClient):
    async def __aenter__(self) -> ScheduleClient:
        return self

    async def create_schedule(self, body: ScheduleCreate) -> SchedulePublic:
        response = await self._send(
            "POST", "/v1/schedules", json=body.model_dump(exclude_none=True)
        )
        return SchedulePublic.model_validate(response.json())

    async def list_schedules(self, limit: int = 50) -> ScheduleList:
        response = await self._send("GET", "/v1/schedules", params={"limit": limit})
        return ScheduleList.model_validate(response.json())

    async def get_schedule(self, schedule_id: str) -> SchedulePublic:
        response = await self._send("GET", f"/v1/schedules/{schedule_id}")
        return SchedulePublic.model_validate(response.json())

    async def update_schedule(self, schedule_id: str, body: ScheduleUpdate) -> SchedulePublic:
        response = await self._send(
            "PATCH", f"/v1/schedules/{schedule_id}", json=body.model_dump(exclude_unset=True)
        )
        return SchedulePublic.model_validate(response.json())

    async def pause_schedule(self, schedule_id: str, note: str | None = None) -> SchedulePublic:
        response = await self._send(
            "POST", f"/v1/schedules/{schedule_id}/pause", json={"note": note}
        )
        return SchedulePublic.model_validate(response.json())

    async def unpause_schedule(self, schedule_id: str, note: str | None = None) -> SchedulePublic:
        response = await self._send(
            "POST", f"/v1/schedules/{schedule_id}/unpause", json={"note": note}
        )
        return SchedulePublic.model_validate(response.json())

    async def trigger_schedule(
        self, schedule_id: str, overlap: BackfillOverlap | None = None
    ) -> ScheduleTriggered:
        response = await self._send(
            "POST", f"/v1/schedules/{schedule_id}/trigger", json={"overlap": overlap}
        )
        return ScheduleTriggered.model_validate(response.json())

    async def backfill_schedule(
        self, schedule_id: str, body: ScheduleBackfillCreate
    ) -> ScheduleBackfillAccepted:
        response = await self._send(
            "POST", f"/v1/schedules/{schedule_id}/backfill", json=body.model_dump(mode="json")
        )
        return ScheduleBackfillAccepted.model_validate(response.json())

    async def delete_schedule(self, schedule_id: str) -> None:
        await self._send("DELETE", f"/v1/schedules/{schedule_id}")

    async def schedule_runs(self, schedule_id: str, limit: int = 20) -> RunList:
        response = await self._send(
            "GET", f"/v1/schedules/{schedule_id}/runs", params={"limit": limit}
        )
        return RunList.model_validate(response.json())
