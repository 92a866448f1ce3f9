"""Webhook and push URLs that lead into Keel's own networks are refused when registered,
through every door (REST runs, schedules, A2A push configs), with a sentence, audited."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from keel.activities.outbound.targets import WebhookTargetPolicy
from keel.activities.store.audit import AuditLog
from keel.activities.store.run_store import Store
from keel.activities.webhooks.delivery import WebhookActivities
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.workflows.webhooks.models import WebhookDelivery, WebhookNotice
from tests.conftest import auth_headers

MakeSettings = Callable[..., Settings]
METADATA = "http://169.254.169.254/latest/meta-data?token=abc"


def problem(response: httpx.Response, field: str) -> str:
    assert response.status_code == 422, response.text
    [item] = response.json()["detail"]
    assert item["loc"][-1] == field, item
    return str(item["msg"])


async def test_private_targets_are_refused_at_registration_and_audited(
    store: Store, workspace: Path, settings_for: MakeSettings
) -> None:
    settings = settings_for("http://127.0.0.1:9/v1", workspace, api_port=free_port())
    tenant = f"hooks-{uuid.uuid4().hex[:8]}"
    body: dict[str, Any] = {"agent": "review", "input": "Review it.", "workspace": str(workspace)}
    async with (
        serve_api(settings) as url,
        httpx.AsyncClient(base_url=url, headers=auth_headers(tenant, "alice"), timeout=30) as http,
    ):
        run = await http.post("/v1/runs", json=body | {"webhook_url": METADATA})
        said = problem(run, "webhook_url")
        assert "resolves to 169.254.169.254" in said and "KEEL_WEBHOOK_TARGETS=loopback" in said
        assert "token=abc" not in said
        assert (await http.get("/v1/runs")).json()["runs"] == []  # nothing started

        public_http = await http.post(
            "/v1/schedules",
            json=body | {"cron_expressions": ["0 2 * * *"], "webhook_url": "http://10.2.3.4/h"},
        )
        assert "resolves to 10.2.3.4" in problem(public_http, "webhook_url")
        # A name that does not resolve yet has nothing to classify: accepted, and each
        # delivery checks it before sending.
        later = await http.post(
            "/v1/schedules",
            json=body | {"cron_expressions": ["0 2 * * *"], "webhook_url": "https://x.invalid/h"},
        )
        assert later.status_code == 201, later.text
        assert (await http.delete(f"/v1/schedules/{later.json()['id']}")).status_code == 204

        sent = await http.post(
            "/a2a",
            headers={"A2A-Version": "1.0"},
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": "m-1",
                        "role": "ROLE_USER",
                        "parts": [{"text": "Review it."}],
                    },
                    "configuration": {"taskPushNotificationConfig": {"url": "http://[fd00::5]/"}},
                },
            },
        )
        error = sent.json()["error"]
        assert error["code"] == -32602 and "resolves to fd00::5" in error["message"], error
        assert (await http.get("/v1/runs")).json()["runs"] == []

    refused = [
        e
        for e in await AuditLog(store.pool).entries(tenant)
        if e.action == "webhook.target_refused"
    ]
    assert [(e.subject, e.detail["field"]) for e in refused] == [
        ("169.254.169.254", "webhook_url"),
        ("10.2.3.4", "webhook_url"),
        ("fd00::5", "url"),
    ]
    assert all(e.actor == "alice" and e.severity == "warning" for e in refused)


async def test_a_delivery_refused_at_its_target_is_audited_once_however_often_retried(
    store: Store,
) -> None:
    tenant = f"hooks-{uuid.uuid4().hex[:8]}"

    async def metadata(host: str, port: int) -> list[str]:
        return ["169.254.169.254"]

    activities = WebhookActivities(
        b"s" * 32,
        targets=WebhookTargetPolicy(targets="public"),
        resolve=metadata,
        audit=AuditLog(store.pool),
    )

    def notice(notice_id: str) -> WebhookDelivery:
        return WebhookDelivery(
            url="https://hooks.example.com/keel?token=abc",
            notice=WebhookNotice(
                id=notice_id,
                event="run.finished",
                run_id="run-1",
                tenant_id=tenant,
                status="completed",
                agent="review",
                requester="user:alice",
                occurred_at=datetime(2025, 1, 1, tzinfo=UTC),
            ),
        )

    # A worker that crashed after auditing runs the same attempt again; a later notice
    # of the same run is another delivery, audited on its own.
    for notice_id in ("run-1/1", "run-1/1", "run-1/2"):
        with pytest.raises(ApplicationError) as caught:
            await ActivityEnvironment().run(activities.deliver_webhook, notice(notice_id))
        assert caught.value.type == "WebhookTargetRefused"
    refused = [
        e
        for e in await AuditLog(store.pool).entries(tenant)
        if e.action == "webhook.target_refused"
    ]
    assert [(e.subject, e.detail["at"], e.detail["run_id"]) for e in refused] == [
        ("run-1/1/webhook", "delivery", "run-1"),
        ("run-1/2/webhook", "delivery", "run-1"),
    ]
    assert all(e.actor == "system" and "token=abc" not in str(e.detail) for e in refused)
