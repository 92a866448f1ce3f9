"""Dependencies the routers receive: the one service, and the caller it verified."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from keel.api.core.service import KeelService
from keel.api.identity.auth import Principal
from keel.api.identity.console_session import COOKIE_NAME, CSRF_HEADER
from keel.worker.observability.log_format import set_log_context


def _service(request: Request) -> KeelService:
    return request.app.state.service  # type: ignore[no-any-return]


async def current_user(request: Request) -> Principal:
    """The verified caller of a request; 401 (audited) without a valid token, 503 when the
    key set cannot be fetched."""
    service: KeelService = request.app.state.service
    header = request.headers.get("authorization")
    cookie = request.cookies.get(COOKIE_NAME)
    if header is None and cookie and service.auth_mode == "jwt":
        # The console's browser: its session cookie, with a CSRF header on writes.
        return await service.console.principal_for(
            cookie,
            request.method,
            request.headers.get(CSRF_HEADER),
            path=request.url.path,
            client=request.client.host if request.client else None,
        )
    user = await service.authenticate(
        request.headers.get("authorization"),
        path=request.url.path,
        client=request.client.host if request.client else None,
    )
    set_log_context(tenant=user.tenant_id)  # for this request's log lines (bearer callers)
    return user


async def _admin(user: Annotated[Principal, Depends(current_user)], request: Request) -> Principal:
    """The caller if an admin; else 403, audited before it is sent."""
    service: KeelService = request.app.state.service
    await service.audit.require_admin(user, "admin", request.url.path)
    return user


ServiceDep = Annotated[KeelService, Depends(_service)]
CurrentUser = Annotated[Principal, Depends(current_user)]
AdminUser = Annotated[Principal, Depends(_admin)]
