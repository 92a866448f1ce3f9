"""What a tenant needs to check the notices Keel sends its webhook receivers."""

from __future__ import annotations

from keel.activities.store.audit import AuditEntry
from keel.activities.webhooks.signature import SIGNATURE_HEADER, tenant_signing_secret
from keel.api.core.context import CoreParts
from keel.api.core.schemas.admin import WebhookSecretPublic
from keel.api.identity.auth import Principal
from keel.worker.config.webhook_secret import webhook_server_secret

__all__ = ["WebhookSecrets"]


class WebhookSecrets:
    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts

    async def signing_secret(self, user: Principal) -> WebhookSecretPublic:
        """The caller's tenant's signing secret; every read of it is audited."""
        secret = tenant_signing_secret(webhook_server_secret(self._parts.settings), user.tenant_id)
        await self._parts.audit.log.append(
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
