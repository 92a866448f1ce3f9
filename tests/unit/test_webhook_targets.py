"""Where webhooks and A2A push notifications may go: the address classes the operator
allows, https for public receivers, and the check again at delivery (DNS rebinding)."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from keel.activities.outbound.targets import (
    WebhookHostUnresolved,
    WebhookTargetPolicy,
    WebhookTargetRefused,
    check_webhook_target,
    resolve_host,
)
from keel.activities.webhooks.delivery import WebhookActivities
from keel.workflows.webhooks.models import WebhookDelivery, WebhookNotice
from tests.unit.test_pinned_transport import NAME, receiver

PUBLIC = WebhookTargetPolicy(targets="public")
LOOPBACK = WebhookTargetPolicy()  # the default
PRIVATE = WebhookTargetPolicy(targets="private")


def answers(*addresses: str):  # type: ignore[no-untyped-def]
    async def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


@pytest.mark.parametrize(
    ("address", "allowed_by"),
    [
        ("93.184.215.14", {"public", "loopback", "private"}),
        ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", {"public", "loopback", "private"}),
        ("127.0.0.1", {"loopback", "private"}),
        ("::1", {"loopback", "private"}),
        ("::ffff:127.0.0.1", {"loopback", "private"}),
        ("10.1.2.3", {"private"}),
        ("192.168.0.10", {"private"}),
        ("172.16.5.4", {"private"}),
        ("169.254.169.254", {"private"}),  # a cloud's metadata service
        ("fe80::1", {"private"}),
        ("fd00::1", {"private"}),
        ("100.64.0.1", {"private"}),
        ("0.0.0.0", {"private"}),
    ],
)
async def test_each_address_class_is_allowed_only_where_the_operator_says(
    address: str, allowed_by: set[str]
) -> None:
    for policy in (PUBLIC, LOOPBACK, PRIVATE):
        url = "https://hooks.example.com/keel"
        if policy.targets in allowed_by:
            await check_webhook_target(url, policy, answers(address))
        else:
            with pytest.raises(WebhookTargetRefused) as caught:
                await check_webhook_target(url, policy, answers(address))
            message = str(caught.value)
            assert f"resolves to {address.removeprefix('::ffff:')}," in message
            assert f"KEEL_WEBHOOK_TARGETS={policy.targets}" in message


async def test_one_disallowed_address_among_several_refuses_the_url() -> None:
    with pytest.raises(WebhookTargetRefused, match=r"10\.0\.0\.7"):
        await check_webhook_target(
            "https://hooks.example.com/", PUBLIC, answers("93.184.215.14", "10.0.0.7")
        )


async def test_public_receivers_need_https_unless_the_operator_allows_http() -> None:
    with pytest.raises(WebhookTargetRefused, match="must use https://"):
        await check_webhook_target(
            "http://hooks.example.com/k?token=abc", LOOPBACK, answers("93.184.215.14")
        )
    allow_http = WebhookTargetPolicy(allow_http=True)
    await check_webhook_target("http://hooks.example.com/k", allow_http, answers("93.184.215.14"))
    # A local receiver of a dev stack, or an intranet one the operator allows, may be http.
    await check_webhook_target("http://127.0.0.1:9000/hook", LOOPBACK)
    await check_webhook_target("http://10.0.0.2/hook", PRIVATE)


async def test_the_url_must_be_http_with_a_host_and_a_name_must_resolve() -> None:
    with pytest.raises(WebhookTargetRefused, match="http:// or https://"):
        await check_webhook_target("file:///etc/passwd", PRIVATE)
    with pytest.raises(WebhookHostUnresolved, match="does not resolve"):
        await check_webhook_target("https://no-such-host.invalid/x", PRIVATE)
    assert await resolve_host("127.0.0.1", 80) == ["127.0.0.1"]


def notice_to(url: str) -> WebhookDelivery:
    return WebhookDelivery(
        url=url,
        notice=WebhookNotice(
            id="run-1/1",
            event="run.finished",
            run_id="run-1",
            tenant_id="acme",
            status="completed",
            agent="review",
            requester="user:alice",
            occurred_at=datetime(2025, 1, 1, tzinfo=UTC),
        ),
    )


async def test_delivery_checks_again_so_a_name_rebound_to_loopback_gets_nothing() -> None:
    sent: list[httpx.Request] = []

    def receive(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(204)

    addresses = ["93.184.215.14"]

    async def rebinding(host: str, port: int) -> list[str]:
        return list(addresses)

    url = "https://hooks.example.com/keel?token=abc"
    await check_webhook_target(url, PUBLIC, rebinding)  # as registered: public
    activities = WebhookActivities(
        b"s" * 32, transport=httpx.MockTransport(receive), targets=PUBLIC, resolve=rebinding
    )
    addresses[:] = ["127.0.0.1"]  # the name now points at the worker itself
    with pytest.raises(ApplicationError) as caught:
        await ActivityEnvironment().run(activities.deliver_webhook, notice_to(url))
    assert caught.value.non_retryable and caught.value.type == "WebhookTargetRefused"
    assert "resolves to 127.0.0.1" in str(caught.value) and "token=abc" not in str(caught.value)
    assert sent == []

    # A name that does not resolve at delivery may be a passing DNS failure: retried.
    async def nowhere(host: str, port: int) -> list[str]:
        raise WebhookHostUnresolved("The webhook host hooks.example.com does not resolve.")

    flaky = WebhookActivities(b"s" * 32, transport=httpx.MockTransport(receive), resolve=nowhere)
    with pytest.raises(ApplicationError) as unresolved:
        await ActivityEnvironment().run(flaky.deliver_webhook, notice_to(url))
    assert not unresolved.value.non_retryable and unresolved.value.type == "WebhookUnreachable"


async def test_delivery_connects_to_the_address_it_checked_not_to_a_second_lookup() -> None:
    """A name that answers an allowed address to the check and a blocked one afterwards
    (DNS rebinding) reaches only the checked one; the notice arrives signed, for its host."""
    lookups: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"] if len(lookups) == 1 else ["169.254.169.254"]

    secret = b"s" * 32
    async with receiver() as (port, seen):
        url = f"http://user:pw@{NAME}:{port}/keel?token=abc"
        activities = WebhookActivities(secret, targets=LOOPBACK, resolve=rebinding)
        receipt = await ActivityEnvironment().run(activities.deliver_webhook, notice_to(url))
    assert receipt.status_code == 204 and lookups == [NAME]
    head = seen[0].decode().lower()
    assert head.startswith("post /keel?token=abc http/1.1")
    assert f"host: {NAME}:{port}" in head and "x-keel-signature: t=" in head


async def test_a_receiver_that_cannot_be_reached_is_named_without_its_password() -> None:
    async with receiver() as (port, _):
        pass  # closed: nothing listens on the port any more
    url = f"http://user:secret-pw@{NAME}:{port}/keel"
    activities = WebhookActivities(b"s" * 32, targets=LOOPBACK, resolve=answers("127.0.0.1"))
    with pytest.raises(ApplicationError) as caught:
        await ActivityEnvironment().run(activities.deliver_webhook, notice_to(url))
    assert caught.value.type == "WebhookUnreachable"
    assert f"at {NAME}:{port} could not" in str(caught.value)
    assert "secret-pw" not in str(caught.value) and "user" not in str(caught.value)
