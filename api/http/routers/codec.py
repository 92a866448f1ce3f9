"""/v1/codec: the codec server the Temporal Web UI and `temporal` CLI decode payloads with.

Point the UI (`--ui-codec-endpoint`, or its codec setting) or the CLI
(`--codec-endpoint URL/v1/codec --codec-auth "Bearer TOKEN"`) here: they POST
`{"payloads": [...]}` to `/encode` and `/decode` and get the same shape back.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from keel.api.core.codec import CodecOperation
from keel.api.core.errors import Invalid
from keel.api.core.schemas.admin import CodecPayloads
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, documented

router = APIRouter(
    prefix="/v1/codec",
    tags=["codec"],
    responses={**AUTHENTICATED, **documented(403, 404)},
)


@router.post("/{operation}", response_model=CodecPayloads)
async def apply_codec(
    operation: CodecOperation,
    body: CodecPayloads,
    request: Request,
    user: CurrentUser,
    service: ServiceDep,
) -> CodecPayloads:
    """Encrypt (`encode`) or decrypt (`decode`) payloads; admins only."""
    payloads = _from_wire(body)
    done = await service.codec.apply(operation, payloads, user, request.url.path)
    return CodecPayloads.model_validate(json_format.MessageToDict(Payloads(payloads=done)))


def _from_wire(body: CodecPayloads) -> list[Payload]:
    try:
        parsed = json_format.ParseDict(body.model_dump(), Payloads())
    except json_format.ParseError as exc:
        raise Invalid(
            "The payloads are not protobuf JSON: metadata values and data must be base64.",
            field="payloads",
        ) from exc
    return list(parsed.payloads)
