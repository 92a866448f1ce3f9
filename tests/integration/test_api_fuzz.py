"""Property-based fuzz of the HTTP API from the OpenAPI schema it serves, over real HTTP.

Schemathesis generates valid and invalid requests for every operation (boundary cases,
then random ones) and checks each answer: never a server error, and always a status
code, content type, headers and body that the schema documents.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn
from keel.worker.temporal_client import connect
from tests.conftest import auth_headers, in_process_worker

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]

USER = auth_headers()
ADMIN = auth_headers("default", "alice", "keel:admin")
KNOWN_SESSION = "fuzz-known-session"
FUZZ_SEED = 20_251_129
STARTUP_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 30.0
FUZZ_SETTINGS = settings(
    max_examples=30,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@dataclass
class KeelUnderFuzz:
    url: str
    workspace: Path
    known_run: str
    """A finished run of this test's: one id per test, since its request names the
    test's own workspace (the same run id with another request is a 409)."""


class StackThread:
    """The worker and the API on an event loop of their own, in a thread.

    Schemathesis' tests are synchronous; served from the test's own event loop, the
    API would never get to answer them.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.url: str | None = None
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="keel-under-fuzz", daemon=True)

    def __enter__(self) -> str:
        self._thread.start()
        if not self._ready.wait(STARTUP_TIMEOUT_S) or self.url is None:
            self.__exit__()
            raise RuntimeError(f"Keel did not start for the fuzz: {self.error!r}")
        return self.url

    def __exit__(self, *_: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:
            self.error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        settings = self.settings
        assert settings.temporal_address is not None and settings.database_url is not None
        # The session's client and store belong to the test loop; this loop needs its own.
        client = await connect(settings.temporal_address)
        store = await Store.open(settings.database_url)
        try:
            # Its own stack: in a thread with its own event loop, for schemathesis's blocking calls.
            async with in_process_worker(client, store, settings), serve_api(settings) as url:
                self.url = url
                self._ready.set()
                await self._stop.wait()
        finally:
            await store.close()


@pytest.fixture
def keel(
    workspace: Path, scripted: StartLLM, settings_for: MakeSettings
) -> Iterator[KeelUnderFuzz]:
    """Keel with a finished run and a session to aim at; any run the fuzz starts ends at once."""
    # Final answers only; a session's runs see its history, one turn further each time.
    llm = scripted(Script(turns=[Turn(content=f"Done ({i}).") for i in range(8)]))
    settings = settings_for(llm, workspace, api_port=free_port())
    with (
        StackThread(settings) as url,
        httpx.Client(base_url=url, headers=USER, timeout=REQUEST_TIMEOUT_S) as http,
    ):
        session = {"agent": "review", "workspace": str(workspace), "session_id": KNOWN_SESSION}
        created = http.post("/v1/sessions", json=session)
        assert created.status_code == 201, created.text
        run = {"agent": "review", "input": "Review it.", "workspace": str(workspace)}
        known_run = f"fuzz-known-run-{uuid.uuid4().hex[:8]}"
        started = http.post("/v1/runs", json={**run, "run_id": known_run})
        assert started.status_code == 201, started.text
        deadline = time.monotonic() + 20
        while http.get(f"/v1/runs/{known_run}").json()["status"] != "completed":
            assert time.monotonic() < deadline, "the known run did not complete"
            time.sleep(0.05)
        yield KeelUnderFuzz(url=url, workspace=workspace, known_run=known_run)


def _load(keel: KeelUnderFuzz) -> schemathesis.BaseSchema:
    schema = schemathesis.openapi.from_url(f"{keel.url}/openapi.json")
    schema.config.update(base_url=keel.url)
    schema.config.seed = FUZZ_SEED
    # A body over the size limit is refused before it is read: that is a rejection too.
    rejection = schema.config.checks.negative_data_rejection
    rejection.expected_statuses = [*rejection.expected_statuses, "413"]
    return schema


@pytest.fixture
def keel_schema(keel: KeelUnderFuzz) -> schemathesis.BaseSchema:
    return _load(keel)


@pytest.fixture
def keel_schema_random_only(keel: KeelUnderFuzz) -> schemathesis.BaseSchema:
    """Without the boundary-case phase: a quick sample of each operation."""
    schema = _load(keel)
    schema.config.phases.update(phases=["examples", "fuzzing"])
    return schema


@pytest.fixture(autouse=True)
def _node_id_for_schemathesis(request: pytest.FixtureRequest) -> None:
    # Schemathesis 4.32 relabels `request.node._nodeid` per operation, which pytest 9.2
    # no longer has; a plain attribute to read and restore is all it needs.
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid


def _aim_at_known_resources(case: schemathesis.Case, keel: KeelUnderFuzz) -> None:
    """Point about half of the valid cases at things that exist.

    Fuzzed ids and agent names almost never name a real run, session or agent, so
    otherwise every handler would stop at its 404 or 422 before the stores and Temporal.
    """
    if case.meta is None or case.meta.generation.mode is not GenerationMode.POSITIVE:
        return

    def chosen(value: object) -> bool:
        return zlib.crc32(repr(value).encode()) % 2 == 0

    params = case.path_parameters or {}
    if "run_id" in params and chosen(params):
        params["run_id"] = keel.known_run
    if "session_id" in params and chosen(params):
        params["session_id"] = KNOWN_SESSION
    body = case.body
    is_start = case.method == "POST" and case.path in ("/v1/runs", "/v1/sessions")
    if is_start and isinstance(body, dict) and chosen(body):
        body["agent"] = "review"
        body["workspace"] = str(keel.workspace)


schema = schemathesis.pytest.from_fixture("keel_schema")
random_only = schemathesis.pytest.from_fixture("keel_schema_random_only")


# The SSE stream is fuzzed too: a fuzzed run id is unknown (404) or the finished known
# run, whose stream ends after its terminal event; the request timeout bounds the rest.
@pytest.mark.fuzz  # minutes: 30 generated requests per operation, many starting runs
@schema.parametrize()
@FUZZ_SETTINGS
def test_every_operation_answers_as_documented(
    case: schemathesis.Case, keel: KeelUnderFuzz
) -> None:
    _aim_at_known_resources(case, keel)
    headers = ADMIN if "admin" in (case.operation.tags or []) else USER
    # Valid data may still be refused: the workspace must exist, the agent be known.
    case.call_and_validate(
        headers=headers, timeout=REQUEST_TIMEOUT_S, excluded_checks=[positive_data_acceptance]
    )


@random_only.parametrize()
@settings(FUZZ_SETTINGS, max_examples=8)
def test_without_a_token_every_operation_is_refused_cleanly(case: schemathesis.Case) -> None:
    response = case.call_and_validate(
        timeout=REQUEST_TIMEOUT_S, excluded_checks=[positive_data_acceptance]
    )
    guarded = "401" in case.operation.definition.raw.get("responses", {})
    if guarded and case.meta is not None and case.meta.generation.mode.is_positive:
        # The body limit applies first: a valid body may still be too big.
        assert response.status_code in (401, 413), response.text
