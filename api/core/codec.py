"""The codec endpoint's work: encrypt and decrypt payloads for the Temporal UI and CLI.

The Temporal Web UI and `temporal --codec-endpoint` send the payloads of a history
to a codec server to show them in clear. Decoding reveals any tenant's run (a payload
carries no tenant), so only admins may; a refusal is audited. The codec is the one on
the API's own Temporal client, so the endpoint and the API always agree on the keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from temporalio.api.common.v1 import Payload

from keel.api.core.context import CoreParts
from keel.api.core.errors import Forbidden, Invalid, NotFound
from keel.api.identity.auth import Principal
from keel.worker.payload_codec import EncryptionCodec, PayloadKeyError

CodecOperation = Literal["encode", "decode"]
# The UI sends a page of history events at once; a request never needs more.
MAX_PAYLOADS = 10_000


class CodecService:
    """Encode and decode for admins, with the keys the API itself uses."""

    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts
        codec = parts.temporal.data_converter.payload_codec
        self._codec = codec if isinstance(codec, EncryptionCodec) else None

    async def apply(
        self, operation: CodecOperation, payloads: Sequence[Payload], user: Principal, path: str
    ) -> list[Payload]:
        """`operation` on `payloads`, in order; refuses non-admins and undecryptable input."""
        if not user.is_admin:
            await self._parts.audit.admin_refused(user, f"codec.{operation}", path)
            raise Forbidden(
                "The codec endpoint needs the keel:admin scope: decoded payloads show "
                "every tenant's runs."
            )
        if self._codec is None:
            raise NotFound(
                "Payload encryption is off, so there is nothing to decode: set "
                "KEEL_PAYLOAD_KEYS on the API and workers to turn it on."
            )
        if len(payloads) > MAX_PAYLOADS:
            raise Invalid(f"At most {MAX_PAYLOADS} payloads a request.", field="payloads")
        if operation == "encode":
            return await self._codec.encode(payloads)
        try:
            return await self._codec.decode(payloads)
        except PayloadKeyError as exc:
            raise Invalid(str(exc), field="payloads") from exc
