"""Client mistakes are one info line each: nothing at warning or above, no traceback, no
secret, so a terminal at warning (`keel dev`) stays quiet."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from tests.conftest import auth_headers, token_for

MakeSettings = Callable[..., Settings]


async def test_malformed_requests_log_one_info_line_each(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    settings_for: MakeSettings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = settings_for("http://127.0.0.1:9/v1", workspace, api_port=free_port())
    token = token_for()
    headers = auth_headers()
    async with serve_api(settings) as url, httpx.AsyncClient(base_url=url, timeout=10) as http:
        caplog.clear()
        caplog.set_level(logging.DEBUG)
        requests = [
            http.post("/v1/runs", headers=headers, content=b"{not json"),
            http.post("/a2a", headers=headers, content=b"{not json"),
            http.post("/a2a", headers={**headers, "a2a-version": "1.0"}, content=b"{not json"),
            http.post(
                "/a2a",
                headers={**headers, "a2a-version": "1.0"},
                json={"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": 5}},
            ),
            http.post("/a2a", headers=headers, json={"jsonrpc": "2.0", "id": 3, "params": []}),
            http.post(  # v0.3 params the SDK's v0.3 adapter cannot validate
                "/a2a",
                headers=headers,
                json={"jsonrpc": "2.0", "id": 4, "method": "tasks/resubscribe", "params": []},
            ),
            http.post(
                "/a2a",
                headers={**headers, "a2a-version": "1.0"},
                json={"jsonrpc": "2.0", "id": 1, "method": "NoSuchMethod", "params": {}},
            ),
            http.get("/v1/runs/no-such-run", headers=headers),
            http.get("/v1/runs", headers={"authorization": "Bearer not-a-token"}),
        ]
        statuses = [(await r).status_code for r in requests]
    records = [r for r in caplog.records if r.name.startswith(("keel", "a2a", "uvicorn.error"))]
    print(
        statuses, [(r.name, r.levelname, r.getMessage()[:100], bool(r.exc_info)) for r in records]
    )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info], [
        (r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING
    ]
    lines = [r for r in records if r.levelno == logging.INFO]
    assert len(lines) == len(requests), [r.getMessage() for r in lines]
    assert not any(
        token in r.getMessage() or "not-a-token" in r.getMessage() for r in caplog.records
    )
