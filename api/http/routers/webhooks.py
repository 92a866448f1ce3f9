"""/v1/webhooks: what a tenant needs to check the notices Keel sends its receivers."""

from __future__ import annotations

from fastapi import APIRouter

from keel.api.core.schemas.admin import WebhookSecretPublic
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], responses=AUTHENTICATED)


@router.get("/signing-secret", response_model=WebhookSecretPublic)
async def signing_secret(user: CurrentUser, service: ServiceDep) -> WebhookSecretPublic:
    """The caller's tenant's signing secret: verify `X-Keel-Signature` with it."""
    return await service.webhooks.signing_secret(user)
