"""Administration: webhook secrets, the payload codec and retention."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class WebhookSecretPublic(BaseModel):
    """The secret this tenant's webhook receivers verify signatures with."""

    tenant_id: str
    secret: str
    signature_header: str = Field(description="`t=<unix seconds>,v1=<hex HMAC-SHA256>`.")


class CodecPayload(BaseModel):
    """One Temporal payload in protobuf's JSON form: base64 bytes, empty ones left out."""

    metadata: dict[str, str] = Field(
        default_factory=dict, description="Metadata values, each base64 (`encoding`, ...)."
    )
    data: str = Field(default="", description="The payload's bytes, base64.")


class CodecPayloads(BaseModel):
    """What the Temporal Web UI and `temporal --codec-endpoint` send and receive."""

    payloads: list[CodecPayload] = Field(default_factory=list)


class RetentionPolicyUpdate(BaseModel):
    """How long a tenant's finished runs keep their contents."""

    model_config = ConfigDict(extra="forbid")

    days: int = Field(ge=1, le=36_500, description="Days after a run finishes.")


class RetentionSweepStarted(BaseModel):
    """A sweep was asked of the retention schedule; it runs on a worker."""

    schedule_id: str
