"""The worker `bench.scale` drives: `keel worker` in a process of its own, its log, and
a sampler of the memory and CPU of the processes that do the work."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

from bench.scale_report import Sample
from bench.step_overhead import BenchError
from keel.worker.config.settings import Settings, environment_of
from keel.worker.temporal_client import connect

SAMPLE_EVERY_S = 0.2
READY_POLL_S = 0.2
WORKER_READY_TIMEOUT_S = 60.0
WORKER_STOP_TIMEOUT_S = 10.0
LOG_TAIL_LINES = 15


def worker_env(settings: Settings) -> dict[str, str]:
    """`keel worker` reads its settings from the environment, like in production."""
    return {
        **os.environ,
        **environment_of(
            settings,
            "temporal_address",
            "database_url",
            "openai_base_url",
            "openai_api_key",
            "model",
            "task_queue",
            "workspace_root",
            "data_dir",
            "llm_max_attempts",
            "jwt_secret",
            "max_concurrent_activities",
        ),
    }


@contextmanager
def worker_process(settings: Settings, log_file: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m api.cli.main worker`, logging to `log_file`, stopped on exit."""
    with open(log_file, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "keel.api.cli.main", "worker"],
            env=worker_env(settings),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(WORKER_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def worker_ready(proc: subprocess.Popen[bytes], log_file: Path, settings: Settings) -> None:
    """Until the worker polls its task queue, as the Temporal server sees it."""
    assert settings.temporal_address is not None
    client = await connect(settings.temporal_address)
    request = DescribeTaskQueueRequest(
        namespace=settings.temporal_namespace,
        task_queue=TaskQueue(name=settings.task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    deadline = time.monotonic() + WORKER_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        check_alive(proc, log_file)
        described = await client.workflow_service.describe_task_queue(request)
        if described.pollers:
            return
        await asyncio.sleep(READY_POLL_S)
    raise BenchError(
        f"The worker did not poll its task queue within {WORKER_READY_TIMEOUT_S:g} s:\n"
        + log_tail(log_file)
    )


def check_alive(proc: subprocess.Popen[bytes], log_file: Path) -> None:
    if proc.poll() is not None:
        raise BenchError(f"The worker exited with code {proc.returncode}:\n" + log_tail(log_file))


def log_tail(log_file: Path) -> str:
    lines = log_file.read_text(errors="replace").splitlines()
    return "\n".join(lines[-LOG_TAIL_LINES:])


def count_tracebacks(log_file: Path) -> int:
    if not log_file.exists():
        return 0
    return log_file.read_text(errors="replace").count("Traceback (most recent call last)")


class Sampler:
    """Reads the worker's RSS and the CPU time of the busy processes every 200 ms, on a thread."""

    def __init__(
        self, psutil: Any, watched: dict[str, tuple[int | None, bool]], into: list[Sample]
    ) -> None:
        """`watched`: label to (pid, whether its children count)."""
        self._psutil = psutil
        self._procs = {
            name: (psutil.Process(pid), with_children)
            for name, (pid, with_children) in watched.items()
            if pid
        }
        self._samples = into
        self._gone = (psutil.NoSuchProcess, psutil.AccessDenied)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._take()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._take()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            self._take()

    def _take(self) -> None:
        cpu: dict[str, float] = {}
        rss = 0
        for name, (proc, with_children) in self._procs.items():
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    children = proc.children(recursive=True) if with_children else []
                    own_rss = proc.memory_info().rss
            except self._gone:
                continue
            cpu[name] = times.user + times.system
            if with_children:
                # Includes the children that have exited, like Postgres backends.
                cpu[name] += times.children_user + times.children_system
            for child in children:
                try:
                    with child.oneshot():
                        child_times = child.cpu_times()
                        child_rss = child.memory_info().rss
                except self._gone:
                    continue
                cpu[name] += child_times.user + child_times.system
                own_rss += child_rss
            if name == "worker":
                rss = own_rss
        machine = self._psutil.cpu_times()
        idle = machine.idle + getattr(machine, "iowait", 0.0)
        # Linux counts guest time inside user time as well.
        guest = getattr(machine, "guest", 0.0) + getattr(machine, "guest_nice", 0.0)
        cpu["machine"] = sum(machine) - idle - guest
        self._samples.append(Sample(at=time.perf_counter(), worker_rss=rss, cpu_s=cpu))
