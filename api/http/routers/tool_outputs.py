"""/v1/runs/{run_id}/tool-outputs/{step}/{call_id}: the whole stored output of one tool call,
which events only preview."""

from __future__ import annotations

from fastapi import APIRouter

from keel.activities.store.console_reads import StoredToolOutput
from keel.api.core.schemas.common import StoredText
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, documented

router = APIRouter(prefix="/v1/runs", tags=["events"], responses=AUTHENTICATED)


@router.get(
    "/{run_id}/tool-outputs/{step}/{call_id}",
    response_model=StoredToolOutput,
    responses=documented(404),
)
async def tool_output(
    run_id: StoredText,
    step: int,
    call_id: StoredText,
    user: CurrentUser,
    service: ServiceDep,
) -> StoredToolOutput:
    return await service.tool_outputs.get(run_id, step, call_id, user)
