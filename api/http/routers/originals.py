"""/v1/admin/originals: the original of a masked tool output or arguments
(scope keel:read-original; the read is audited before the answer)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from keel.api.core.schemas.common import StoredText
from keel.api.core.schemas.originals import OriginalKindName, OriginalPublic, OriginalRead
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, documented

router = APIRouter(
    prefix="/v1/admin/originals",
    tags=["admin"],
    responses={**AUTHENTICATED, **documented(403, 404)},
)


@router.post("/{kind}/{run_id}/{step}/{call_id}", response_model=OriginalPublic)
async def read_original(
    kind: OriginalKindName,
    run_id: StoredText,
    step: int,
    call_id: StoredText,
    user: CurrentUser,
    service: ServiceDep,
    body: Annotated[OriginalRead | None, Body()] = None,
) -> OriginalPublic:
    """The unmasked original; an audit entry of the read is committed first."""
    reason = body.reason if body is not None else None
    return await service.originals.read(kind, run_id, step, call_id, user, reason=reason)
