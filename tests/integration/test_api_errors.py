"""Requests the API fuzz found answered with a 500, or off the documented schema."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from keel.activities.store.records import NewRun
from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn
from tests.conftest import auth_headers

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
ADMIN = auth_headers("default", "alice", "keel:admin")


@pytest.fixture
async def http(
    workspace: Path, scripted: StartLLM, settings_for: MakeSettings
) -> AsyncIterator[httpx.AsyncClient]:
    """The API alone, no worker: every request here is refused before a run could start."""
    llm = scripted(Script(turns=[Turn(content="unused")]))
    settings = settings_for(llm, workspace, api_port=free_port())
    async with (
        serve_api(settings) as url,
        httpx.AsyncClient(base_url=url, headers=auth_headers()) as client,
    ):
        yield client


def field_error(response: httpx.Response) -> dict[str, object]:
    """The one error of a 422, checked against the documented `ValidationError` shape."""
    assert response.status_code == 422, (response.status_code, response.text)
    [error] = response.json()["detail"]
    assert set(error) >= {"loc", "msg", "type"}, error
    return error  # type: ignore[no-any-return]


async def test_nul_characters_are_refused_naming_the_field(
    http: httpx.AsyncClient, workspace: Path
) -> None:
    """Postgres cannot store NUL: these reached a query (or the path resolver) and got a 500."""
    for path, loc in {
        "/v1/runs/a%00b": ["path", "run_id"],
        "/v1/runs/a%00b/events": ["path", "run_id"],
        "/v1/runs/a%00b/events/stream": ["path", "run_id"],
        "/v1/runs/a%00b/interactions": ["path", "run_id"],
        "/v1/runs/r/interactions/a%00b": ["path", "interaction_id"],
        "/v1/sessions/a%00b": ["path", "session_id"],
        "/v1/runs?status=a%00b": ["query", "status"],
        "/v1/runs?agent=a%00b": ["query", "agent"],
    }.items():
        error = field_error(await http.get(path))
        assert error["loc"] == loc and "NUL" in str(error["msg"]), (path, error)
    for path in ("/v1/admin/audit?tenant=a%00b", "/v1/admin/audit/verify?tenant=a%00b"):
        error = field_error(await http.get(path, headers=ADMIN))
        assert error["loc"] == ["query", "tenant"], (path, error)

    run = {"agent": "review", "input": "x", "workspace": str(workspace)}
    for field, value in [
        ("input", "a\x00b"),
        ("model", "a\x00b"),
        ("approver", "user:a\x00b"),
        ("workspace", f"{workspace}\x00"),
    ]:
        error = field_error(await http.post("/v1/runs", json={**run, field: value}))
        assert error["loc"] == ["body", field], error
    error = field_error(await http.post("/v1/runs", json={**run, "metadata": {"k": "\x00"}}))
    assert error["loc"][:3] == ["body", "metadata", "k"], error  # type: ignore[index]
    session = {"agent": "review", "workspace": str(workspace), "metadata": {"k": "a\x00"}}
    error = field_error(await http.post("/v1/sessions", json=session))
    assert error["loc"][:2] == ["body", "metadata"], error  # type: ignore[index]
    decision = {"decision": "answer", "text": "\x00"}
    error = field_error(await http.post("/v1/runs/r/interactions/i", json=decision))
    assert error["loc"] == ["body", "text"], error


async def test_a_lone_surrogate_is_a_422_not_a_500(
    http: httpx.AsyncClient, workspace: Path
) -> None:
    """`"\\ud800"` is valid JSON, not valid Unicode: the 422 echoing it failed to encode."""
    body = json.dumps({"agent": "review", "workspace": str(workspace), "input": "a\ud800"})
    response = await http.post(
        "/v1/runs", content=body, headers={"content-type": "application/json"}
    )
    error = field_error(response)
    assert error["loc"] == ["body", "input"] and error["input"] == "a\ud800", error


async def test_a_malformed_cursor_is_a_field_error_in_the_documented_shape(
    http: httpx.AsyncClient,
) -> None:
    """Cursor errors lacked `type`; a cursor naming a NUL id reached Postgres."""
    nul_id = base64.urlsafe_b64encode(b"2025-01-01T00:00:00+00:00|run-\x00").decode()
    for path in ("/v1/runs", "/v1/sessions"):
        for cursor in (nul_id, "!!", base64.urlsafe_b64encode(b"\xff").decode()):
            error = field_error(await http.get(path, params={"cursor": cursor}))
            assert error["loc"] == ["query", "cursor"], (path, cursor, error)
            assert "next_cursor" in str(error["msg"])


async def test_a_body_that_is_not_utf8_is_a_422_like_malformed_json(
    http: httpx.AsyncClient,
) -> None:
    """FastAPI answered these with an undocumented 400, 'There was an error parsing the body'."""
    for path in ("/v1/runs", "/v1/sessions", "/v1/runs/r/interactions/i"):
        response = await http.post(
            path, content=b'{"input": "\xff"}', headers={"content-type": "application/json"}
        )
        error = field_error(response)
        assert error["type"] == "json_invalid" and "UTF-8" in str(error["msg"]), error


async def test_method_not_allowed_lists_every_method_of_the_path(
    http: httpx.AsyncClient,
) -> None:
    """Starlette's 405 listed only the methods of the first route on the path."""
    for path in ("/v1/runs", "/v1/sessions", "/v1/runs/r/interactions/i"):
        response = await http.request("DELETE", path)
        assert response.status_code == 405
        assert set(response.headers["allow"].split(", ")) == {"GET", "POST"}, path
        assert response.json() == {"detail": "Method Not Allowed"}


async def test_handlers_own_field_errors_have_the_documented_shape(
    http: httpx.AsyncClient, store: Store, workspace: Path
) -> None:
    """FastAPI documents a 422 as a list of {loc, msg, type}; handlers' own lacked `type`."""
    unknown = {"agent": "nope", "input": "x", "workspace": str(workspace)}
    assert field_error(await http.post("/v1/runs", json=unknown))["loc"] == ["body", "agent"]
    missing = {"agent": "review", "input": "x", "workspace": "missing"}
    assert field_error(await http.post("/v1/runs", json=missing))["loc"] == ["body", "workspace"]

    run_id = f"errors-{uuid.uuid4().hex[:8]}"
    await store.create_run(
        NewRun(
            run_id=run_id,
            tenant_id="default",
            agent="review",
            model="scripted",
            requester="user:alice",
            trigger="api",
            workspace=str(workspace),
            input="x",
        )
    )
    stream = await http.get(f"/v1/runs/{run_id}/events/stream", headers={"last-event-id": "x"})
    assert field_error(stream)["loc"] == ["header", "Last-Event-ID"]
