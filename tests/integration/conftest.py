"""Fixtures the integration tests share on top of `tests/conftest.py`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer
from tests.integration.keel_http import ALICE, LaunchKeel, MakeSettings, StartLLM, keel_api


@pytest.fixture
def keel_app(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> LaunchKeel:
    """Keel for this test's workspace, on the given script (or a scripted model already
    started): a worker on a task queue of its own, the API on a free port, and a client
    that speaks as alice unless `headers` say otherwise (`worker=False`: the API alone).
    Other keyword arguments are settings (`model=` among them)."""

    @asynccontextmanager
    async def launch(
        script: Script | ScriptedLLMServer,
        /,
        *,
        headers: dict[str, str] = ALICE,
        http_timeout: float | httpx.Timeout = 30.0,
        worker: bool = True,
        **overrides: object,
    ) -> AsyncIterator[httpx.AsyncClient]:
        llm = scripted(script) if isinstance(script, Script) else script
        settings = settings_for(llm, workspace, api_port=free_port(), **overrides)
        async with keel_api(
            temporal_client,
            store,
            settings,
            headers=headers,
            http_timeout=http_timeout,
            worker=worker,
        ) as http:
            yield http

    return launch
