"""A Postgres outage of about 40 s in the middle of a run: the run rides it out, and the
API answers 503 quickly (with `Retry-After`) while the database is away.

Keel reaches Postgres through a TCP proxy in this test; cutting it drops every open
connection and refuses new ones, as a database restart or failover does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import psycopg.conninfo
import pytest

from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from tests.conftest import auth_headers, in_process_worker
from tests.integration.test_durability import wait_until

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
OUTAGE_S = 40
# How long a request may take to be told the database is away.
QUICK_S = 5.0


class CuttableProxy:
    """Forwards TCP to Postgres until `cut()`; then drops and refuses until `restore()`."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self.is_cut = False
        self.port = 0

    async def __aenter__(self) -> CuttableProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self._drop_all()

    def cut(self) -> None:
        self.is_cut = True
        self._drop_all()

    def restore(self) -> None:
        self.is_cut = False

    def _drop_all(self) -> None:
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if self.is_cut:
            client_w.transport.abort()
            return
        try:
            server_r, server_w = await asyncio.open_connection(*self._target)
        except OSError:
            client_w.transport.abort()
            return
        self._open.update((client_w, server_w))
        await asyncio.gather(
            self._pump(client_r, server_w), self._pump(server_r, client_w), return_exceptions=True
        )
        for writer in (client_w, server_w):
            self._open.discard(writer)
            writer.transport.abort()

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65_536):
            writer.write(data)
            await writer.drain()
        writer.transport.abort()


@contextlib.asynccontextmanager
async def proxied(database_url: str) -> AsyncIterator[tuple[CuttableProxy, str]]:
    info = psycopg.conninfo.conninfo_to_dict(database_url)
    async with CuttableProxy(str(info.get("host", "127.0.0.1")), int(info.get("port", 5432))) as p:
        yield p, psycopg.conninfo.make_conninfo(database_url, host="127.0.0.1", port=p.port)


async def timed_get(http: httpx.AsyncClient, path: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = await http.get(path, headers=auth_headers())
    return response, time.monotonic() - started


@pytest.mark.durability
async def test_a_postgres_outage_of_40_s_mid_run(
    temporal_client: object,
    database_url: str,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(name="read_file", arguments={"path": "pkg/core.py"})
                    ]
                ),
                Turn(
                    tool_calls=[
                        ScriptedToolCall(name="read_file", arguments={"path": "README.md"})
                    ],
                    delay_s=2.0,
                ),
                Turn(content="## Files reviewed\n{files_read}"),
            ]
        )
    )
    # Its own stack: Keel reaches Postgres through a proxy the test cuts, with a store of its own.
    async with proxied(database_url) as (proxy, url):
        settings = settings_for(llm, workspace, database_url=url, api_port=free_port())
        store = await Store.open(url)
        try:
            async with (
                in_process_worker(temporal_client, store, settings),  # type: ignore[arg-type]
                serve_api(settings) as api,
                httpx.AsyncClient(base_url=api, timeout=60) as http,
            ):
                created = await http.post(
                    "/v1/runs",
                    headers=auth_headers(),
                    json={"agent": "review", "input": "Review.", "workspace": str(workspace)},
                )
                assert created.status_code == 201, created.text
                run_id = created.json()["id"]
                await wait_until(lambda: llm.requests_by_turn[1] >= 1)
                get_task = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "GetTask",
                    "params": {"id": run_id},
                }
                proxy.cut()  # while the model answers step 2
                cut_at = time.monotonic()
                answers: list[tuple[str, int, float, str | None]] = []
                while time.monotonic() - cut_at < OUTAGE_S:
                    for path in ("/health", f"/v1/runs/{run_id}"):
                        response, took = await timed_get(http, path)
                        answers.append(
                            (path, response.status_code, took, response.headers.get("retry-after"))
                        )
                    # A2A's GetTask: the same retryable refusal, not the SDK's -32603.
                    started = time.monotonic()
                    response = await http.post(
                        "/a2a",
                        headers={**auth_headers(), "A2A-Version": "1.0"},
                        json=get_task,
                    )
                    answers.append(
                        (
                            f"GetTask {response.json().get('error', {}).get('code')}",
                            response.status_code,
                            time.monotonic() - started,
                            response.headers.get("retry-after"),
                        )
                    )
                    await asyncio.sleep(2.0)
                proxy.restore()

                slow = [a for a in answers if a[2] > QUICK_S]
                assert not slow, f"answers that took long while the database was away: {slow}"
                assert {a[1] for a in answers} == {503}, answers
                assert {a[0] for a in answers if a[0].startswith("GetTask")} == {"GetTask -32000"}
                assert all(a[3] for a in answers), "a 503 without Retry-After"
                run = None
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    response = await http.get(f"/v1/runs/{run_id}", headers=auth_headers())
                    if response.status_code == 200 and response.json()["status"] in (
                        "completed",
                        "failed",
                    ):
                        run = response.json()
                        break
                    await asyncio.sleep(0.5)
                assert run is not None, "the run did not finish after the outage"
                assert run["status"] == "completed", run
                assert "- README.md" in run["report"] and "- pkg/core.py" in run["report"]
                health = await http.get("/health")
                assert health.status_code == 200 and health.json()["database"] == "ok"
        finally:
            await store.close()
