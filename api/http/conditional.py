"""Conditional GET for documents clients fetch again and again (agent cards).

A content hash is the entity tag, so every replica gives the same one for the same
document; `Last-Modified` is when the document's source was loaded. A matching
`If-None-Match` (or, without one, an `If-Modified-Since` not before `Last-Modified`)
answers 304 with no body, as RFC 9110 §13 says.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response


def entity_tag(body: bytes) -> str:
    return f'"{hashlib.sha256(body).hexdigest()[:32]}"'


def conditional_json(
    request: Request, data: Any, *, last_modified: datetime, max_age_s: int
) -> Response:
    """`data` as JSON with validators and `Cache-Control`, or 304 when the client has it."""
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    tag = entity_tag(body)
    headers = {
        "ETag": tag,
        "Last-Modified": format_datetime(last_modified, usegmt=True),
        "Cache-Control": f"public, max-age={max_age_s}",
    }
    if _not_modified(request, tag, last_modified):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


def _not_modified(request: Request, tag: str, last_modified: datetime) -> bool:
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None:
        # Weak comparison (RFC 9110 §13.1.2): W/ prefixes do not matter for a GET.
        offered = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
        return "*" in offered or tag in offered
    since = request.headers.get("if-modified-since")
    if since is None:
        return False
    try:
        when = parsedate_to_datetime(since)
    except (TypeError, ValueError):
        return False  # an unreadable date is ignored, as the RFC says
    return when.tzinfo is not None and last_modified <= when
