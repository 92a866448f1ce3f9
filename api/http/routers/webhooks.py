"""/v1/webhooks: what a tenant needs to check the notices Keel sends its receivers."""

from __future__ import annotations

from fastapi import APIRouter

from keel.activities.store.audit import AuditEntry
from keel.activities.webhooks.signature import SIGNATURE_HEADER, tenant_signing_secret
from keel.api.core.schemas import WebhookSecretPublic
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED
from keel.worker.config.webhook_secret import webhook_server_secret

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], responses=AUTHENTICATED)


@router.get("/signing-secret", response_model=WebhookSecretPublic)
async def signing_secret(user: CurrentUser, service: ServiceDep) -> WebhookSecretPublic:
    """The caller's tenant's signing secret: verify `X-Keel-Signature` with it."""
    secret = tenant_signing_secret(webhook_server_secret(service.parts.settings), user.tenant_id)
    await service.parts.audit.log.append(
        AuditEntry(
            tenant_id=user.tenant_id,
            actor=user.subject,
            category="webhook",
            action="webhook.signing_secret_read",
            subject=user.tenant_id,
        )
    )
    return WebhookSecretPublic(
        tenant_id=user.tenant_id, secret=secret, signature_header=SIGNATURE_HEADER
    )
