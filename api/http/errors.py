"""The API's error answers: their shape, how operations document them, and the handlers
for the cases FastAPI's defaults answer wrongly."""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from keel.api.core.errors import (
    STORE_AWAY,
    STORE_UNAVAILABLE_DETAIL,
    Conflict,
    Forbidden,
    Invalid,
    KeelError,
    Misconfigured,
    NotFound,
    OverQuota,
    Unauthenticated,
    Unavailable,
    is_store_away,
)
from keel.api.core.errors import STORE_RETRY_AFTER_S as STORE_RETRY_AFTER_S
from keel.api.core.plain_errors import plain_errors
from keel.api.core.schemas.common import Problem

HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
ERROR_DESCRIPTIONS = {
    401: "No valid bearer token: send `Authorization: Bearer <token>`.",
    403: "The token lacks the scope this operation needs.",
    404: "No such resource, or it belongs to another tenant.",
    409: "The request conflicts with the resource's current state; the detail says which.",
    413: "The request body is larger than the server's limit (KEEL_MAX_BODY_BYTES).",
    429: "A tenant quota is reached; the detail names it and Retry-After says when it resets.",
    500: "Keel's setup is wrong (e.g. its Temporal namespace); the detail says what to run.",
    503: "A service Keel depends on did not answer; try again shortly.",
}


def documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` entries for the error statuses an operation can answer with."""
    return {code: {"model": Problem, "description": ERROR_DESCRIPTIONS[code]} for code in codes}


AUTHENTICATED = documented(401, 413, 503)
"""What every operation behind a bearer token can answer: no valid token, a body over the
limit (which applies to every request), or a key set that could not be fetched."""


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and isinstance(exc.__cause__, ValueError | RecursionError):
        # FastAPI's bare 400 for a body that is not UTF-8 (or nests too deep); malformed
        # JSON gets a documented 422, so this gets one too.
        return JSONResponse(
            {
                "detail": [
                    {
                        "loc": ["body"],
                        "msg": "The body could not be read as JSON; send UTF-8 JSON.",
                        "type": "json_invalid",
                    }
                ]
            },
            status_code=422,
        )
    if exc.status_code != 405:
        return await http_exception_handler(request, exc)
    # Starlette's 405 lists only the methods of the first route on the path; RFC 9110
    # wants every method the resource supports, so ask each route about each method.
    allowed = [
        method
        for method in HTTP_METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in request.app.routes
        )
    ]
    headers = {**(exc.headers or {}), "Allow": ", ".join(allowed)}
    return JSONResponse({"detail": exc.detail}, status_code=405, headers=headers)


STATUS_OF_ERROR: dict[type[KeelError], int] = {
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    Invalid: 422,
    Unavailable: 503,
    OverQuota: 429,
    Misconfigured: 500,
}


def status_of(exc: KeelError) -> int:
    for kind in type(exc).__mro__:
        if kind in STATUS_OF_ERROR:
            return STATUS_OF_ERROR[kind]  # type: ignore[index]
    return 500


def detail_of(exc: KeelError) -> str | list[dict[str, Any]]:
    """A sentence, or (naming the request field at fault) FastAPI's list of problems."""
    if isinstance(exc, Invalid) and exc.problems:
        return exc.problems
    field = getattr(exc, "field", None)
    if field is None:
        return exc.message
    where = exc.where if isinstance(exc, Invalid) else "body"
    return [{"loc": [where, field], "msg": exc.message, "type": "value_error"}]


def headers_of(exc: KeelError) -> dict[str, str]:
    if isinstance(exc, Unauthenticated):
        return {"WWW-Authenticate": "Bearer"}
    if isinstance(exc, Unavailable) and exc.retry_after_s is not None:
        return {"Retry-After": str(exc.retry_after_s)}
    return {}


# Protocol adapters whose clients show `detail` only when it is a string (the
# `langgraph-sdk` raises "422 Unprocessable Entity" for a list): there, every refusal's
# detail is its sentence, naming the field at fault in words.
SENTENCE_DETAIL_PREFIXES = ("/langgraph/",)


def _sentence_only(request: Request) -> bool:
    return request.url.path.startswith(SENTENCE_DETAIL_PREFIXES)


async def _domain_error(request: Request, exc: Exception) -> Response:
    """The service's refusals as Problem JSON, the shape every other error has."""
    assert isinstance(exc, KeelError)
    detail = exc.message if _sentence_only(request) else detail_of(exc)
    body = json.dumps({"detail": jsonable_encoder(detail)}, ensure_ascii=True)
    return Response(
        body, status_code=status_of(exc), media_type="application/json", headers=headers_of(exc)
    )


async def _invalid_request(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    # As FastAPI's own, but ASCII: errors echo the input, and a lone surrogate in it
    # (valid in JSON, refused by pydantic) cannot be encoded as UTF-8.
    errors = [_without_secret_input(e) for e in plain_errors(exc.errors())]
    detail: object = errors
    if _sentence_only(request) and errors:
        first = errors[0]
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        detail = f"{where}: {first.get('msg')}" if where else str(first.get("msg"))
    body = json.dumps({"detail": jsonable_encoder(detail)}, ensure_ascii=True)
    return Response(body, status_code=422, media_type="application/json")


# Fields whose value a 422 must not echo back: a secret the user answered, a token.
_SECRET_FIELDS = frozenset({"secret", "password", "token", "refresh_token", "subject_token"})


def _without_secret_input(error: dict[str, Any]) -> dict[str, Any]:
    if any(str(part) in _SECRET_FIELDS for part in error.get("loc", ())):
        return {key: value for key, value in error.items() if key != "input"}
    return error


def store_unavailable() -> JSONResponse:
    """503 with `Retry-After`: what every request gets while Postgres is away."""
    return JSONResponse(
        {"detail": STORE_UNAVAILABLE_DETAIL},
        status_code=503,
        headers={"Retry-After": str(STORE_RETRY_AFTER_S)},
    )


async def _store_outage(request: Request, exc: Exception) -> Response:
    return store_unavailable()


async def _unexpected_error(request: Request, exc: Exception) -> Response:
    if is_store_away(exc):  # wrapped, or raised where the handlers by class do not reach
        return store_unavailable()
    # Last resort: a JSON body like every other answer. Starlette re-raises the exception
    # after sending it, so the server still logs it with its traceback.
    return JSONResponse(
        {
            "detail": "Keel failed on this request and logged why; try again, and report "
            "it if it keeps happening."
        },
        status_code=500,
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(KeelError, _domain_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    for outage in STORE_AWAY:
        app.add_exception_handler(outage, _store_outage)
    app.add_exception_handler(Exception, _unexpected_error)
