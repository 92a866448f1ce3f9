"""Webhook signatures, and how `deliver_webhook` treats each answer of a receiver."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from keel.activities.webhooks.delivery import WebhookActivities
from keel.activities.webhooks.signature import (
    signature_header,
    tenant_signing_secret,
    verify_signature,
)
from keel.workflows.webhooks.models import WebhookDelivery, WebhookNotice, WebhookReceipt

SERVER_SECRET = b"server-secret-for-tests-0123456789abcdef"
NOW = 1_750_000_000


def delivery(tenant: str = "acme") -> WebhookDelivery:
    return WebhookDelivery(
        url="https://hooks.example.com/keel?token=abc",
        notice=WebhookNotice(
            id="run-1/1",
            event="run.finished",
            run_id="run-1",
            tenant_id=tenant,
            status="completed",
            agent="review",
            requester="user:alice",
            occurred_at=datetime(2025, 1, 1, tzinfo=UTC),
            stop_reason="final_answer",
        ),
    )


def test_tenant_secrets_differ_and_do_not_reveal_the_server_secret() -> None:
    acme, other = (tenant_signing_secret(SERVER_SECRET, t) for t in ("acme", "other"))
    assert acme != other and acme.startswith("whsec_") and len(acme) == 6 + 64
    assert acme == tenant_signing_secret(SERVER_SECRET, "acme")
    assert SERVER_SECRET.decode() not in acme


def test_a_signature_covers_the_body_the_time_and_the_secret() -> None:
    secret = tenant_signing_secret(SERVER_SECRET, "acme")
    body = b'{"event":"run.finished"}'
    header = signature_header(secret, NOW, body)
    assert header.startswith(f"t={NOW},v1=")
    assert verify_signature(secret, header, body, now=NOW + 10)
    assert not verify_signature(secret, header, body + b" ", now=NOW)
    assert not verify_signature(secret + "x", header, body, now=NOW)
    assert not verify_signature(secret, header.replace(f"t={NOW}", f"t={NOW + 1}"), body, now=NOW)
    assert not verify_signature(secret, header, body, now=NOW + 301)  # a replay, too late
    assert not verify_signature(secret, "v1=abc", body, now=NOW)
    rotated = f"{header},v1={'0' * 64}"
    assert verify_signature(secret, rotated, body, now=NOW)


async def public_dns(host: str, port: int) -> list[str]:
    """hooks.example.com as a public name resolves: no DNS is asked in unit tests."""
    return ["93.184.215.14"]


async def deliver(answer: httpx.Response | Exception) -> tuple[WebhookReceipt, httpx.Request]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if isinstance(answer, Exception):
            raise answer
        return answer

    activities = WebhookActivities(
        SERVER_SECRET, transport=httpx.MockTransport(handle), resolve=public_dns
    )
    receipt = await ActivityEnvironment().run(activities.deliver_webhook, delivery())
    return receipt, seen[0]


async def test_a_delivered_notice_is_signed_json() -> None:
    receipt, request = await deliver(httpx.Response(204))
    assert receipt.status_code == 204
    body = request.content
    assert json.loads(body)["run_id"] == "run-1"
    assert request.headers["x-keel-event"] == "run.finished"
    assert request.headers["x-keel-delivery"] == "run-1/1"
    secret = tenant_signing_secret(SERVER_SECRET, "acme")
    assert verify_signature(secret, request.headers["x-keel-signature"], body)


@pytest.mark.parametrize("status", [500, 503, 429, 408])
async def test_a_receiver_that_is_down_is_retried(status: int) -> None:
    with pytest.raises(ApplicationError) as caught:
        await deliver(httpx.Response(status, headers={"retry-after": "7"}))
    assert not caught.value.non_retryable and caught.value.type == "WebhookFailed"
    assert caught.value.next_retry_delay == timedelta(seconds=7)
    assert "token=abc" not in str(caught.value)  # only the host is named


async def test_an_unreachable_receiver_is_retried() -> None:
    with pytest.raises(ApplicationError) as caught:
        await deliver(httpx.ConnectError("refused"))
    assert not caught.value.non_retryable and caught.value.type == "WebhookUnreachable"


@pytest.mark.parametrize("status", [400, 401, 404, 410, 301])
async def test_a_refusal_is_not_retried(status: int) -> None:
    with pytest.raises(ApplicationError) as caught:
        await deliver(httpx.Response(status))
    assert caught.value.non_retryable and caught.value.type == "WebhookRejected"


def test_the_verification_snippet_in_the_docs_accepts_keel_signatures() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "schedules.md").read_text()
    snippet = docs.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(snippet, namespace)
    secret = tenant_signing_secret(SERVER_SECRET, "acme")
    body = delivery().notice.model_dump_json().encode()
    header = signature_header(secret, int(time.time()), body)
    assert namespace["verify"](secret, header, body)
    assert not namespace["verify"](secret, header, body[:-1])
    assert not namespace["verify"](secret, signature_header(secret, NOW, body), body)


async def test_a_standard_webhooks_library_verifies_the_delivery() -> None:
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError

    _, request = await deliver(httpx.Response(204))
    secret = tenant_signing_secret(SERVER_SECRET, "acme")
    headers = {
        k: request.headers[k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")
    }
    assert headers["webhook-id"] == "run-1/1"
    verified = Webhook(secret).verify(request.content, headers)
    assert verified["run_id"] == "run-1"
    # Another tenant's secret, or a changed body, does not verify.
    with pytest.raises(WebhookVerificationError):
        Webhook(tenant_signing_secret(SERVER_SECRET, "other")).verify(request.content, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(request.content + b" ", headers)
