"""/v1/auth/exchange: an identity provider's token in, a Keel token out (no Keel bearer).

RFC 8693 clients send the request form-encoded; others may send the same fields as JSON.
The answer carries `Cache-Control: no-store`, as a token response must (RFC 6749 5.1).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from keel.api.core.errors import invalid_request
from keel.api.core.schemas.common import Problem
from keel.api.core.schemas.token_exchange import IssuedToken, TokenExchangeRequest
from keel.api.http.deps import ServiceDep

router = APIRouter(prefix="/v1/auth", tags=["auth"])

FORM = "application/x-www-form-urlencoded"
_REQUEST_SCHEMA = TokenExchangeRequest.model_json_schema()
_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "The subject_token was refused; the detail says why."},
    413: {"model": Problem, "description": "The request body is over the server's limit."},
    415: {"model": Problem, "description": "Send the request as form fields or JSON."},
    422: {"model": Problem, "description": "A field is missing or has a value Keel refuses."},
    503: {"model": Problem, "description": "The provider's key set could not be fetched."},
}


@router.post(
    "/exchange",
    response_model=IssuedToken,
    responses=_RESPONSES,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                FORM: {"schema": _REQUEST_SCHEMA},
                "application/json": {"schema": _REQUEST_SCHEMA},
            },
        }
    },
)
async def exchange(request: Request, service: ServiceDep) -> JSONResponse:
    """Trade a configured identity provider's token (an OIDC ID or access token, or a
    trusted gateway's signed assertion) for a short-lived Keel token."""
    body = await _body(request)
    issued = await service.token_exchange.exchange(
        body,
        path=request.url.path,
        client=request.client.host if request.client else None,
    )
    return JSONResponse(
        issued.model_dump(), headers={"Cache-Control": "no-store", "Pragma": "no-cache"}
    )


async def _body(request: Request) -> TokenExchangeRequest:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    raw = await request.body()
    try:
        if content_type == FORM:
            fields = dict(parse_qsl(raw.decode("utf-8", errors="strict"), keep_blank_values=True))
            return TokenExchangeRequest.model_validate(fields)
        if content_type == "application/json":
            return TokenExchangeRequest.model_validate(json.loads(raw))
    except ValidationError as exc:
        raise invalid_request(exc) from None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise HTTPException(
            422, detail="The request body is not valid form data or JSON; send the fields again."
        ) from None
    raise HTTPException(415, detail=f"Send subject_token as form fields ({FORM}) or as JSON.")
