"""The registration-time check of webhook, A2A push and coordination agent URLs
(`keel.activities.outbound.targets`), with the refusal audited and answered as a 422 naming
the field."""

from __future__ import annotations

from urllib.parse import urlsplit

from keel.activities.outbound.targets import (
    TargetKind,
    WebhookHostUnresolved,
    WebhookTargetPolicy,
    WebhookTargetRefused,
    check_webhook_target,
)
from keel.activities.store.audit import AuditEntry
from keel.api.core.context import CoreParts
from keel.api.core.errors import Invalid
from keel.api.identity.auth import Principal

REFUSED_ACTIONS: dict[TargetKind, str] = {
    "webhook": "webhook.target_refused",
    "A2A agent": "coordination.target_refused",
}


async def check_webhook(
    parts: CoreParts,
    url: str | None,
    user: Principal,
    *,
    field: str = "webhook_url",
    what: TargetKind = "webhook",
) -> None:
    """Refuse `url` (422 on `field`, audited) unless the operator allows where it leads."""
    if url is None:
        return
    settings = parts.settings
    policy = WebhookTargetPolicy(
        targets=settings.webhook_targets, allow_http=settings.webhook_allow_http
    )
    try:
        await check_webhook_target(url, policy, what=what)
    except WebhookHostUnresolved:
        # Nothing to classify yet (a receiver set up later, a passing DNS failure): each
        # delivery checks again before it sends, and refuses what resolves where it may not.
        return
    except WebhookTargetRefused as exc:
        await parts.audit.log.append(
            AuditEntry(
                tenant_id=user.tenant_id,
                actor=user.subject,
                category="webhook",
                action=REFUSED_ACTIONS[what],
                severity="warning",
                # Only the host: a URL's path or query may hold a token.
                subject=urlsplit(url).hostname or "",
                detail={"field": field, "reason": str(exc), "at": "registration"},
            )
        )
        raise Invalid(str(exc), field=field) from None
