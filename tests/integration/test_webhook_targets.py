"""Webhook and push URLs that lead into Keel's own networks are refused when registered,
through every door (REST runs, schedules, A2A push configs), with a sentence, audited."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from activities.store.audit import AuditLog
from activities.store.run_store import Store
from api.cli.local_stack import serve_api
from tests.conftest import auth_headers
from worker.dev_stack import free_port
from worker.settings import Settings

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
