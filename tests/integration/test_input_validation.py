"""Bad input, sent exactly as issue 21 found it, answers with a clear client error on every
surface (A2A, REST, MCP): never a 5xx, never -32603, and nothing is stored."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn
from tests.conftest import auth_headers

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
TENANT = f"validation-{uuid.uuid4().hex[:8]}"
"""This module's own tenant, so its checks that nothing was stored see only its runs."""
ALICE = {**auth_headers(TENANT, "alice"), "A2A-Version": "1.0"}
MCP_ACCEPT = {"accept": "application/json, text/event-stream"}


def send(text: str = "go", **message: Any) -> dict[str, Any]:
    """A v1.0 SendMessage with `message` fields added or replaced."""
    base = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]}
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": base | message},
    }


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


async def a2a(http: httpx.AsyncClient, body: Any) -> tuple[int, dict[str, Any]]:
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    response = await http.post(
        "/a2a", content=raw, headers={**ALICE, "content-type": "application/json"}
    )
    data: dict[str, Any] = response.json()
    return response.status_code, data


def invalid_params(status: int, data: dict[str, Any]) -> str:
    """The -32602 answer's message (asserting that it is one)."""
    assert status == 200, data
    assert data["error"]["code"] == -32602, data
    message: str = data["error"]["message"]
    assert "PostgreSQL" not in message and "WorkflowId" not in message
    return message


async def test_a2a_refuses_malformed_params_deep_json_and_what_rest_refuses(
    store: Store, workspace: Path, scripted: StartLLM, settings_for: MakeSettings
) -> None:
    settings = settings_for(
        scripted(Script(turns=[Turn(content="unused")])), workspace, api_port=free_port()
    )
    async with serve_api(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
        # 13: v0.1 `tasks/send` with params, message or parts that are no objects.
        v01 = {"jsonrpc": "2.0", "id": 1, "method": "tasks/send"}
        status, data = await a2a(http, v01 | {"params": [1, 2]})
        assert "params must be a JSON object" in invalid_params(status, data)
        assert data["id"] == 1
        status, data = await a2a(http, v01 | {"params": {"message": "hi"}})
        assert "params.message must be a JSON object" in invalid_params(status, data)
        status, data = await a2a(http, v01 | {"params": {"message": {"parts": "hi"}}})
        assert "parts must be an array" in invalid_params(status, data)
        status, data = await a2a(http, v01 | {"params": {"message": {"parts": [1]}}})
        assert "parts[0] must be a JSON object" in invalid_params(status, data)

        # 13: JSON nested 100,000 deep, and metadata 3,000 deep.
        status, data = await a2a(http, nested(100_000))
        assert status == 200 and data["error"]["code"] == -32600
        assert "levels deep" in data["error"]["message"]
        deep_meta = json.dumps(send())[:-2] + ', "metadata": ' + nested(3_000) + "}}"
        status, data = await a2a(http, deep_meta)
        assert status == 200 and data["error"]["code"] == -32600

        # 14: NUL in a task id, a text and a contextId; a 1,000-character contextId.
        get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "run-a\x00b"}}
        assert "NUL" in invalid_params(*await a2a(http, get))
        assert "NUL" in invalid_params(*await a2a(http, send("a\x00b")))
        assert "message.contextId" in invalid_params(*await a2a(http, send(contextId="a\x00b")))
        long_context = invalid_params(*await a2a(http, send(contextId="c" * 1_000)))
        assert long_context.startswith("message.contextId:")

        # 16: what REST refuses, A2A refuses too.
        assert "message.contextId" in invalid_params(*await a2a(http, send(contextId="a b/c")))
        assert "ROLE_USER" in invalid_params(*await a2a(http, send(role="ROLE_KING")))
        huge = invalid_params(*await a2a(http, send("x" * 900_000)))
        assert "200000" in huge.replace(",", "") and huge.startswith("message.parts")
        v03 = {"jsonrpc": "2.0", "id": 3, "method": "message/send"}
        v03_body = {"messageId": "m3", "role": "user", "parts": [{"kind": "text", "text": "go"}]}
        spaced = v03 | {"params": {"message": v03_body | {"contextId": "a b/c"}}}
        assert "message.contextId" in invalid_params(*await a2a(http, spaced))
        v01_spaced = v01 | {
            "params": {"sessionId": "a b/c", "message": {"role": "user", "parts": [{"text": "go"}]}}
        }
        assert "message.contextId" in invalid_params(*await a2a(http, v01_spaced))
    assert await store.list_runs(tenant_id=TENANT, limit=10) == []


async def test_rest_refuses_a_symlink_loop_and_a_nul_in_a_schedule_id(
    store: Store, workspace: Path, scripted: StartLLM, settings_for: MakeSettings
) -> None:
    settings = settings_for(
        scripted(Script(turns=[Turn(content="unused")])), workspace, api_port=free_port()
    )
    loop = settings.workspace_root / "loop"
    os.symlink(loop, loop)
    async with serve_api(settings) as url:
        headers = auth_headers(TENANT)
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
            body = {"agent": "review", "input": "look", "workspace": str(loop)}
            looped = await http.post("/v1/runs", json=body)
            assert looped.status_code == 422, looped.text
            assert "symlink loop" in json.dumps(looped.json()["detail"])
            session = await http.post("/v1/sessions", json={"agent": "review", "workspace": "loop"})
            assert session.status_code == 422, session.text
            nul = await http.get("/v1/schedules/a%00b/runs")
            assert nul.status_code == 422, nul.text
            assert "NUL" in json.dumps(nul.json()["detail"])
            nul_run = await http.get("/v1/runs/a%00b")
            assert nul_run.status_code == 422, nul_run.text
    assert await store.list_runs(tenant_id=TENANT, limit=10) == []


async def test_another_tenants_schedule_runs_are_unknown(
    workspace: Path, scripted: StartLLM, settings_for: MakeSettings
) -> None:
    settings = settings_for(
        scripted(Script(turns=[Turn(content="unused")])), workspace, api_port=free_port()
    )
    async with serve_api(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
        body = {
            "agent": "review",
            "input": "nightly",
            "workspace": str(workspace),
            "interval_s": 86_400,
            "paused": True,
            "schedule_id": f"sch-iso-{free_port()}",
        }
        created = await http.post("/v1/schedules", json=body, headers=auth_headers("tenant-a"))
        assert created.status_code == 201, created.text
        sid = body["schedule_id"]
        own = await http.get(f"/v1/schedules/{sid}/runs", headers=auth_headers("tenant-a"))
        assert own.status_code == 200 and own.json()["runs"] == []
        theirs = await http.get(f"/v1/schedules/{sid}/runs", headers=auth_headers("tenant-b"))
        unknown = await http.get("/v1/schedules/sch-never/runs", headers=auth_headers("tenant-b"))
        assert theirs.status_code == unknown.status_code == 404
        assert theirs.json()["detail"] == f"No schedule {sid}."
        await http.delete(f"/v1/schedules/{sid}", headers=auth_headers("tenant-a"))


async def test_mcp_answers_a_request_with_an_object_id(
    workspace: Path, scripted: StartLLM, settings_for: MakeSettings
) -> None:
    settings = settings_for(
        scripted(Script(turns=[Turn(content="unused")])), workspace, api_port=free_port()
    )
    async with serve_api(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
        request = {"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list", "params": {}}
        answer = await http.post("/mcp", json=request, headers={**auth_headers(), **MCP_ACCEPT})
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == -32600
        assert "string or an integer" in answer.json()["error"]["message"]
        notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        quiet = await http.post("/mcp", json=notification, headers={**auth_headers(), **MCP_ACCEPT})
        assert quiet.status_code == 202  # a real notification still gets no body
