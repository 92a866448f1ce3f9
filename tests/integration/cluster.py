"""Keel on more than one machine, on one: several `keel worker` and `keel api` processes
against one Temporal and one Postgres, as a deployment that scaled out runs them.

`KeelCluster` starts the processes from the environment alone (each with a data
directory of its own, so nothing is shared through files), kills them with SIGKILL and
starts them again. `ModelRequestLog` wraps the scripted model server so that every
chat request is recorded with the process generation that sent it (each worker is
given its own path prefix on the one server) and the run and step it asks for: a test
can then tell a step asked again because its worker died from one asked twice.
`follow_stream` reads a run's event stream through one API, and resumes from
`Last-Event-ID` through the next when a connection breaks.

The scale-out drill (`test_scale_out.py`) and its benchmark (`bench/scale_out.py`) use
these.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from keel.worker.config.settings import Settings, environment_of
from tests.integration.test_event_stream import read_sse

SHARED_SETTINGS = (
    "temporal_address",
    "database_url",
    "openai_api_key",
    "model",
    "task_queue",
    "workspace_root",
    "workspace_tenancy",
    "coverage_plans",
    "bash_sandbox",
    "jwt_secret",
    "llm_max_attempts",
)
"""What every replica is given alike: one Temporal, one Postgres, one task queue, one
workspace root, one secret. The payload keys travel as JSON beside them."""
READY_TIMEOUT_S = 120.0
"""A process importing Keel on a loaded 2-core machine takes seconds; allow minutes."""
POLL_S = 0.1
TERMINAL_EVENTS = frozenset({"done", "error", "cancelled"})
TAG = re.compile(r"\[drill ([\w.-]+)\]")
"""How a run's input names it to the model server: `[drill r0042]`."""


@dataclass
class Process:
    """One `keel` process of the cluster: its role, its slot, its generation."""

    role: str
    slot: int
    generation: str
    """`w7`: the seventh worker started; the model server knows its requests by it."""
    popen: subprocess.Popen[bytes]
    started_at: float
    killed_at: float | None = None


@dataclass
class ModelAsk:
    """One chat request the model server received."""

    caller: str
    """The generation of the process that sent it."""
    tag: str | None
    """The run's tag from its first user message, if it has one."""
    step: int
    """Assistant messages the request carries: the step it asks for, from 0."""
    at: float


class ModelRequestLog:
    """ASGI middleware in front of the scripted model server: strips the caller's path
    prefix (`/w7/v1/chat/completions` → `/v1/chat/completions`) and records the request."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.asks: list[ModelAsk] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        caller, _, rest = scope["path"].lstrip("/").partition("/")
        scope = {**scope, "path": f"/{rest}", "raw_path": f"/{rest}".encode()}
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        if rest.endswith("chat/completions"):
            self._record(caller, body)
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _record(self, caller: str, body: bytes) -> None:
        try:
            messages = json.loads(body).get("messages") or []
        except (ValueError, AttributeError):
            return
        users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        found = TAG.search(str(users[0].get("content"))) if users else None
        steps = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        self.asks.append(
            ModelAsk(caller, found.group(1) if found else None, steps, time.monotonic())
        )


class KeelCluster:
    """`workers` worker processes and `apis` API processes on one task queue."""

    def __init__(
        self,
        settings: Settings,
        logs: Path,
        *,
        model_root: str,
        workers: int,
        apis: int,
        api_ports: Sequence[int],
        env: dict[str, str] | None = None,
    ) -> None:
        """`model_root`: the scripted server's root URL; each process gets `/{gen}/v1`."""
        self.settings = settings
        self.logs = logs
        self.model_root = model_root.rstrip("/")
        self.worker_slots = workers
        self.api_ports = list(api_ports)[:apis]
        self.extra_env = env or {}
        self.processes: list[Process] = []
        self._current: dict[tuple[str, int], Process] = {}
        self._count = {"w": 0, "api": 0}
        logs.mkdir(parents=True, exist_ok=True)

    # -- the processes -------------------------------------------------------------

    def env(self, generation: str, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            **environment_of(self.settings, *SHARED_SETTINGS),
            **self.extra_env,
            "OPENAI_BASE_URL": f"{self.model_root}/{generation}/v1",
            "KEEL_DATA_DIR": str(self.logs / generation),
            **extra,
        }

    def _spawn(self, role: str, slot: int) -> Process:
        prefix = "w" if role == "worker" else "api"
        self._count[prefix] += 1
        generation = f"{prefix}{self._count[prefix]}"
        extra = {"KEEL_API_PORT": str(self.api_ports[slot])} if role == "api" else {}
        with open(self.logs / f"{generation}.log", "wb") as out:
            popen = subprocess.Popen(
                [sys.executable, "-m", "keel.api.cli.main", role],
                env=self.env(generation, **extra),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        proc = Process(role, slot, generation, popen, time.monotonic())
        self.processes.append(proc)
        self._current[role, slot] = proc
        return proc

    def current(self, role: str, slot: int) -> Process:
        return self._current[role, slot]

    def api_url(self, slot: int) -> str:
        return f"http://127.0.0.1:{self.api_ports[slot]}"

    async def start(self, temporal: Client) -> None:
        for slot in range(self.worker_slots):
            self._spawn("worker", slot)
        for slot in range(len(self.api_ports)):
            self._spawn("api", slot)
        await asyncio.gather(
            *(self.worker_ready(temporal, slot) for slot in range(self.worker_slots)),
            *(self.api_ready(slot) for slot in range(len(self.api_ports))),
        )

    def kill(self, role: str, slot: int) -> Process:
        """SIGKILL the slot's process, as a machine that dies would leave it."""
        proc = self._current[role, slot]
        proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait()
        proc.killed_at = time.monotonic()
        return proc

    def restart(self, role: str, slot: int) -> Process:
        return self._spawn(role, slot)

    async def worker_ready(self, temporal: Client, slot: int) -> None:
        """Until the slot's worker polls the task queue, as the Temporal server sees it."""
        proc = self._current["worker", slot]
        request = DescribeTaskQueueRequest(
            namespace=self.settings.temporal_namespace,
            task_queue=TaskQueue(name=self.settings.task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
        identity = f"{proc.popen.pid}@"

        async def polling() -> bool:
            described = await temporal.workflow_service.describe_task_queue(request)
            return any(p.identity.startswith(identity) for p in described.pollers)

        await self._until(proc, polling, "poll the task queue")

    async def api_ready(self, slot: int) -> None:
        proc = self._current["api", slot]
        async with httpx.AsyncClient(base_url=self.api_url(slot), timeout=5) as http:

            async def ready() -> bool:
                try:
                    return (await http.get("/readyz")).status_code == 200
                except httpx.TransportError:
                    return False

            await self._until(proc, ready, "answer /readyz")

    async def _until(self, proc: Process, check: Callable[[], Awaitable[bool]], what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise AssertionError(
                    f"{proc.generation} exited with {proc.popen.returncode}:\n{self.log_tail(proc)}"
                )
            if await check():
                return
            await asyncio.sleep(POLL_S)
        raise AssertionError(
            f"{proc.generation} did not {what} in {READY_TIMEOUT_S:g} s:\n{self.log_tail(proc)}"
        )

    def log_tail(self, proc: Process, lines: int = 20) -> str:
        text = (self.logs / f"{proc.generation}.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def tracebacks(self) -> dict[str, int]:
        """Tracebacks each process logged (a killed process's last words included)."""
        counts = {}
        for proc in self.processes:
            text = (self.logs / f"{proc.generation}.log").read_text(errors="replace")
            counts[proc.generation] = text.count("Traceback (most recent call last)")
        return {gen: n for gen, n in counts.items() if n}

    def stop(self) -> None:
        for proc in self.processes:
            if proc.popen.poll() is None:
                proc.popen.terminate()
        for proc in self.processes:
            try:
                proc.popen.wait(10)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait()


@dataclass
class Followed:
    """What one client saw of a run's event stream, across its reconnections."""

    events: list[tuple[int, str]] = field(default_factory=list)
    """(seq, type) in the order they arrived."""
    connections: list[str] = field(default_factory=list)
    """The API each connection went to, in order."""
    resumed_after: list[int] = field(default_factory=list)
    """The `Last-Event-ID` each reconnection sent."""
    pending: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once an `interaction_pending` arrived."""


async def follow_stream(
    clients: Sequence[httpx.AsyncClient],
    run_id: str,
    headers: dict[str, str],
    into: Followed,
    *,
    retry_s: float = 0.25,
) -> Followed:
    """Read the run's stream through `clients[0]`; when a connection breaks (or closes
    before a terminal event), reconnect with `Last-Event-ID` to the next client in turn."""
    turn = 0
    while True:
        http = clients[turn % len(clients)]
        sent = dict(headers)
        if into.events:
            sent["Last-Event-ID"] = str(into.events[-1][0])
            into.resumed_after.append(into.events[-1][0])
        into.connections.append(str(http.base_url))
        try:
            async with http.stream("GET", f"/v1/runs/{run_id}/events/stream", headers=sent) as r:
                if r.status_code == 200:
                    async for message in read_sse(r):
                        if message.id is None or message.event is None:
                            continue
                        into.events.append((int(message.id), message.event))
                        if message.event == "interaction_pending":
                            into.pending.set()
                        if message.event in TERMINAL_EVENTS:
                            return into
        except (httpx.TransportError, httpx.RemoteProtocolError):
            pass
        turn += 1
        await asyncio.sleep(retry_s)
