"""The `deliver_webhook` activity: POST one signed notice to a receiver.

Temporal retries it (see `workflows.timeouts.WEBHOOK_RETRY`): a receiver that is
unreachable, times out, or answers 408, 409, 425, 429 or 5xx is tried again, with
its `Retry-After` honoured; any other answer outside 2xx is a refusal that no retry
can change, and ends the delivery. Each attempt is signed afresh with its own time.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from keel.activities.a2a.push import A2A_TOKEN_HEADER, a2a_push_body
from keel.activities.llm.providers.retry_status import retry_after, status_is_retryable
from keel.activities.outbound.pinned_transport import PinnedAddresses, pinned_transport
from keel.activities.outbound.targets import (
    Resolve,
    WebhookHostUnresolved,
    WebhookTargetPolicy,
    WebhookTargetRefused,
    check_webhook_target,
    resolve_host,
)
from keel.activities.store.audit import AuditEntry, AuditLog
from keel.activities.store.push_config_store import PushConfigRecord, PushConfigStore
from keel.activities.store.run_tree import RunTreeStore
from keel.activities.webhooks.signature import (
    SIGNATURE_HEADER,
    signature_header,
    standard_webhook_headers,
    tenant_signing_secret,
)
from keel.workflows.activity_refs import WebhookDeliveries
from keel.workflows.error_types import WEBHOOK_REJECTED, WEBHOOK_UNREACHABLE
from keel.workflows.tenant_keys import in_view
from keel.workflows.webhooks.models import (
    PushTarget,
    PushTargets,
    PushTargetsInput,
    WebhookDelivery,
    WebhookNotice,
    WebhookReceipt,
)

MAX_RETRY_AFTER_S = 600


class WebhookActivities(WebhookDeliveries):
    """Signs with per-tenant secrets derived from the server's secret."""

    def __init__(
        self,
        server_secret: bytes,
        *,
        push_configs: PushConfigStore | None = None,
        timeout_s: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
        targets: WebhookTargetPolicy | None = None,
        resolve: Resolve = resolve_host,
        audit: AuditLog | None = None,
        tree: RunTreeStore | None = None,
    ) -> None:
        self._server_secret = server_secret
        self._tree = tree
        self._push_configs = push_configs
        self._timeout_s = timeout_s
        self._transport = transport
        self._targets = targets or WebhookTargetPolicy()
        self._resolve = resolve
        self._audit = audit

    @activity.defn(name="push_targets")
    async def push_targets(self, request: PushTargetsInput) -> PushTargets:
        if self._push_configs is None:
            return PushTargets()
        configs = await self._push_configs.for_task(request.run_id)
        return PushTargets(targets=[PushTarget(config_id=c.id, url=c.url) for c in configs])

    @activity.defn(name="deliver_webhook")
    async def deliver_webhook(self, delivery: WebhookDelivery) -> WebhookReceipt:
        notice = _as_tenant_knows_it(await self._with_usage(delivery.notice))
        body = notice.model_dump_json().encode()
        extra: dict[str, str] = {}
        if delivery.push_config_id is not None:
            config = await self._push_config(notice.run_id, delivery.push_config_id)
            if config is None:  # deleted since the notice was handed over: nobody to tell
                return WebhookReceipt(status_code=0, attempt=activity.info().attempt)
            body = a2a_push_body(notice)
            if config.token:
                extra[A2A_TOKEN_HEADER] = config.token
            if config.auth_scheme:
                extra["authorization"] = f"{config.auth_scheme} {config.auth_credentials or ''}"
        secret = tenant_signing_secret(self._server_secret, notice.tenant_id)
        attempt = activity.info().attempt
        now = int(time.time())
        headers = {
            "content-type": "application/json",
            "user-agent": "Keel-Webhooks/1",
            "x-keel-event": notice.event,
            "x-keel-delivery": notice.id,
            "x-keel-attempt": str(attempt),
            SIGNATURE_HEADER: signature_header(secret, now, body),
            **standard_webhook_headers(secret, notice.id, now, body),
            **extra,
        }
        # Only the host goes into errors: a URL's path or query may hold a token.
        host = _host(delivery.url)
        addresses = await self._check_target(delivery, notice)
        pins = PinnedAddresses()
        pins.pin(delivery.url, addresses)
        transport = self._transport or pinned_transport(pins)
        try:
            async with httpx.AsyncClient(
                timeout=self._timeout_s, transport=transport, follow_redirects=False
            ) as http:
                response = await http.post(delivery.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise ApplicationError(
                f"The webhook receiver at {host} could not be reached ({type(exc).__name__}); "
                "retrying.",
                type=WEBHOOK_UNREACHABLE,
            ) from exc
        status = response.status_code
        if 200 <= status < 300:
            return WebhookReceipt(status_code=status, attempt=attempt)
        if status_is_retryable(status):
            raise ApplicationError(
                f"The webhook receiver at {host} answered {status}; retrying.",
                type="WebhookFailed",
                next_retry_delay=retry_after(response.headers, MAX_RETRY_AFTER_S),
            )
        raise ApplicationError(
            f"The webhook receiver at {host} refused the notice with {status}; "
            "fix the receiver (redirects are not followed), later notices will be sent.",
            type=WEBHOOK_REJECTED,
            non_retryable=True,
        )

    async def _check_target(self, delivery: WebhookDelivery, notice: WebhookNotice) -> list[str]:
        """Again at delivery: the URL's host may resolve elsewhere than at registration.
        The addresses checked, which are the ones the delivery connects to."""
        try:
            return await check_webhook_target(delivery.url, self._targets, self._resolve)
        except WebhookHostUnresolved as exc:
            raise ApplicationError(f"{exc} Retrying.", type=WEBHOOK_UNREACHABLE) from None
        except WebhookTargetRefused as exc:
            if self._audit is not None:
                # Once per delivery and target, however often a crashed attempt is retried.
                await self._audit.append_once(
                    AuditEntry(
                        tenant_id=notice.tenant_id,
                        actor="system",
                        category="webhook",
                        action="webhook.target_refused",
                        severity="warning",
                        subject=f"{notice.id}/{delivery.push_config_id or 'webhook'}",
                        detail={
                            "host": urlsplit(delivery.url).hostname or "",
                            "reason": str(exc),
                            "at": "delivery",
                            "event": notice.event,
                            "run_id": notice.run_id,
                        },
                    )
                )
            raise ApplicationError(
                str(exc), type="WebhookTargetRefused", non_retryable=True
            ) from None

    async def _with_usage(self, notice: WebhookNotice) -> WebhookNotice:
        """The notice with the tokens and cost of the run's whole tree, as recorded now."""
        if self._tree is None or notice.usage is not None:
            return notice
        usage = await self._tree.tree_usage(notice.tenant_id, [notice.run_id])
        return notice.model_copy(update={"usage": usage.get(notice.run_id)})

    async def _push_config(self, task_id: str, config_id: str) -> PushConfigRecord | None:
        if self._push_configs is None:
            return None
        return await self._push_configs.get(task_id, config_id)


def _host(url: str) -> str:
    """The URL's host and port, without the user name and password it may carry."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        return f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return host


def _as_tenant_knows_it(notice: WebhookNotice) -> WebhookNotice:
    """The notice with its ids as the run's tenant knows them: a run kept under a scoped
    key (`workflows.tenant_keys`) shows the id its tenant chose."""
    tenant = notice.tenant_id
    return notice.model_copy(
        update={
            "id": in_view(tenant, notice.id),
            "run_id": in_view(tenant, notice.run_id),
            "schedule_id": notice.schedule_id and in_view(tenant, notice.schedule_id),
            "interactions": [
                i.model_copy(update={"id": in_view(tenant, i.id)}) for i in notice.interactions
            ],
        }
    )
