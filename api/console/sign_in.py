"""/console/session: sign the browser in (exchange a token for a cookie), say who it is,
sign it out. See `api.identity.console_session` for why a cookie and how it is guarded."""

from __future__ import annotations

import time
from typing import Literal

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from keel.api.core.errors import Unauthenticated
from keel.api.core.service import KeelService
from keel.api.identity.auth import LOCAL_PRINCIPAL, Principal
from keel.api.identity.console_session import COOKIE_NAME, ConsoleSession

# Not in the OpenAPI document: the console's own plumbing, described in docs/console.md.
router = APIRouter(prefix="/console/session", tags=["console"], include_in_schema=False)


class SignIn(BaseModel):
    token: str = Field(min_length=1, max_length=16_384, description="A bearer token (JWT).")


class ConsoleWhoAmI(BaseModel):
    """What the console shows in its header, and the CSRF token its writes send."""

    auth: Literal["jwt", "off"]
    signed_in: bool
    tenant_id: str | None = None
    subject: str | None = None
    scopes: list[str] = Field(default_factory=list)
    is_admin: bool = False
    expires_at: int | None = Field(default=None, description="Unix seconds; none with auth off.")
    csrf: str | None = None


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None:
        return True  # browsers send Origin on cross-site POSTs; its absence is not a forgery
    return origin == f"{request.url.scheme}://{request.url.netloc}"


def _signed_in(
    auth: Literal["jwt", "off"], p: Principal, session: ConsoleSession | None
) -> ConsoleWhoAmI:
    return ConsoleWhoAmI(
        auth=auth,
        signed_in=True,
        tenant_id=p.tenant_id,
        subject=p.subject,
        scopes=p.scopes,
        is_admin=p.is_admin,
        expires_at=session.expires_at if session else None,
        csrf=session.csrf if session else "",
    )


@router.get("", response_model=ConsoleWhoAmI)
async def who_am_i(request: Request) -> ConsoleWhoAmI:
    console = _service(request).console
    if console.mode == "off":
        return _signed_in("off", LOCAL_PRINCIPAL, None)
    cookie = request.cookies.get(COOKIE_NAME)
    session = console.session(cookie) if cookie else None
    if session is None:
        return ConsoleWhoAmI(auth="jwt", signed_in=False)
    return _signed_in("jwt", session.principal, session)


@router.post("", response_model=ConsoleWhoAmI)
async def sign_in(body: SignIn, request: Request) -> Response:
    """Exchange a bearer token (pasted, or from `keel dev`'s link) for a session cookie."""
    console = _service(request).console
    if not request.headers.get("content-type", "").startswith("application/json"):
        raise HTTPException(415, detail='Send the token as JSON: {"token": "…"}.')
    if not _same_origin(request):
        raise HTTPException(403, detail="Sign in from the console's own page.")
    if console.mode == "off":
        raise HTTPException(409, detail="Authentication is off (KEEL_AUTH=off); no sign-in.")
    try:
        cookie, session = await console.sign_in(
            body.token.strip(),
            path=request.url.path,
            client=request.client.host if request.client else None,
        )
    except Unauthenticated as exc:
        raise HTTPException(401, detail=exc.message) from exc
    answer = _signed_in("jwt", session.principal, session)
    response = JSONResponse(answer.model_dump(), headers={"Cache-Control": "no-store"})
    response.set_cookie(
        COOKIE_NAME,
        cookie,
        max_age=max(session.expires_at - _now(), 1),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.delete("", status_code=204)
async def sign_out(request: Request) -> Response:
    """Forget the session here and in the browser; a copied cookie stops working too."""
    cookie = request.cookies.get(COOKIE_NAME)
    if cookie:
        _service(request).console.sign_out(cookie)
    response = Response(status_code=204)
    response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="strict")
    return response


def _service(request: Request) -> KeelService:
    return request.app.state.service  # type: ignore[no-any-return]


def _now() -> int:
    return int(time.time())
