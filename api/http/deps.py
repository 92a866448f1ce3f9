"""Dependencies the routers receive: the one service, and the caller it verified."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from api.core.errors import Forbidden
from api.core.service import KeelService
from api.identity.auth import Principal


def _service(request: Request) -> KeelService:
    return request.app.state.service  # type: ignore[no-any-return]


async def current_user(request: Request) -> Principal:
    """The verified caller of a request; 401 (audited) without a valid token, 503 when the
    key set cannot be fetched."""
    service: KeelService = request.app.state.service
    return await service.authenticate(
        request.headers.get("authorization"),
        path=request.url.path,
        client=request.client.host if request.client else None,
    )


async def _admin(user: Annotated[Principal, Depends(current_user)]) -> Principal:
    if not user.is_admin:
        raise Forbidden("This endpoint needs the keel:admin scope.")
    return user


ServiceDep = Annotated[KeelService, Depends(_service)]
CurrentUser = Annotated[Principal, Depends(current_user)]
AdminUser = Annotated[Principal, Depends(_admin)]
