"""How one implementation is measured, in a process of its own.

`python -m bench.peers.<impl> --temporal HOST:PORT --llm-url URL ...` runs one
untimed warm-up, `--repeat` timed runs one after another (each after `--pause`
seconds of idle), then `--concurrency` runs at once, and prints one line
`PEER-FIGURES {json}` with the figures, or with the error that stopped it. The
process's peak RSS is the worker's peak memory, since the worker is all it runs.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from pydantic import BaseModel
from temporalio.client import Client

MARKER = "PEER-FIGURES "
"""Prefix of the one stdout line the parent reads."""


class PeerError(RuntimeError):
    """A run did not go as scripted, so its timing would measure nothing."""


@dataclass(frozen=True)
class PeerArgs:
    """What the parent tells every implementation."""

    temporal_address: str
    llm_url: str
    steps: int
    repeat: int
    concurrency: int
    pause_s: float
    timeout_s: float
    """Budget of the whole process; also each workflow's execution timeout."""
    local_activities: bool
    """Only for the hand-written loop: local activities instead of regular ones."""


@dataclass(frozen=True)
class WorkflowRef:
    """The workflow a run started, for its history."""

    workflow_id: str
    run_id: str | None


RunOnce = Callable[[], Awaitable[WorkflowRef | None]]
"""Run the agent once to its answer and check it; the workflow it ran, if any."""


@dataclass(frozen=True)
class Peer:
    """One implementation, ready to run: its worker is up."""

    run_once: RunOnce
    client: Client | None
    """Reads histories; None for the loop without Temporal."""
    verify: Callable[[WorkflowRef], Awaitable[None]] | None = None
    """Checks what a run left behind, untimed, where its answer alone does not tell."""


class Figures(BaseModel):
    """What one implementation measured."""

    steps: int
    """Tool steps per run."""
    sequential_s: list[float]
    """Seconds of each timed sequential run."""
    concurrent_runs: int
    concurrent_s: float
    """Seconds from starting `concurrent_runs` runs at once until the last one answered."""
    history_bytes: list[int]
    """Serialized size of every history event of each timed run, all its workflows; empty
    without Temporal."""
    peak_rss_kb: int
    sequential_cpu_s: float = 0.0
    """CPU seconds (user and system) of this process over the timed sequential runs."""
    concurrent_cpu_s: float = 0.0
    """CPU seconds of this process over the concurrent runs."""


class Outcome(BaseModel):
    """The line a child prints: its figures, or why it has none."""

    figures: Figures | None = None
    error: str | None = None


def parse_args(prog: str, argv: list[str] | None = None) -> PeerArgs:
    parser = argparse.ArgumentParser(prog=f"python -m {prog}", description=__doc__)
    parser.add_argument("--temporal", default="", help="host:port of the Temporal frontend")
    parser.add_argument("--llm-url", required=True, help="OpenAI base_url of the scripted LLM")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--pause", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--local-activities", action="store_true")
    args = parser.parse_args(argv)
    return PeerArgs(
        temporal_address=args.temporal,
        llm_url=args.llm_url,
        steps=args.steps,
        repeat=args.repeat,
        concurrency=args.concurrency,
        pause_s=args.pause,
        timeout_s=args.timeout,
        local_activities=args.local_activities,
    )


def serve(
    prog: str,
    setup: Callable[[PeerArgs], AbstractAsyncContextManager[Peer]],
    argv: list[str] | None = None,
) -> None:
    """The `__main__` of an implementation: measure it and print the outcome line."""
    args = parse_args(prog, argv)
    try:
        figures = asyncio.run(_measure_within(args, setup))
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
        print(MARKER + Outcome(error=reason).model_dump_json(), flush=True)
        raise SystemExit(1) from None
    print(MARKER + Outcome(figures=figures).model_dump_json(), flush=True)


async def _measure_within(
    args: PeerArgs, setup: Callable[[PeerArgs], AbstractAsyncContextManager[Peer]]
) -> Figures:
    try:
        async with asyncio.timeout(args.timeout_s), setup(args) as peer:
            return await measure(args, peer)
    except TimeoutError:
        raise PeerError(f"not done within its budget of {args.timeout_s:.0f} s") from None


async def measure(args: PeerArgs, peer: Peer) -> Figures:
    """Warm up, time sequential runs, then concurrent ones; checks and histories are untimed."""
    await _verify(peer, [await peer.run_once()])
    sequential: list[float] = []
    histories: list[int] = []
    sequential_cpu = 0.0
    for _ in range(args.repeat):
        await asyncio.sleep(args.pause_s)
        started = time.perf_counter()
        cpu = cpu_s()
        ref = await peer.run_once()
        sequential_cpu += cpu_s() - cpu
        sequential.append(time.perf_counter() - started)
        await _verify(peer, [ref])
        if ref is not None and peer.client is not None:
            histories.append(await history_bytes(peer.client, ref))
    await asyncio.sleep(args.pause_s)
    started = time.perf_counter()
    cpu = cpu_s()
    refs = await asyncio.gather(*(peer.run_once() for _ in range(args.concurrency)))
    concurrent_s = time.perf_counter() - started
    concurrent_cpu = cpu_s() - cpu
    await _verify(peer, refs)
    return Figures(
        steps=args.steps,
        sequential_s=sequential,
        concurrent_runs=args.concurrency,
        concurrent_s=concurrent_s,
        history_bytes=histories,
        peak_rss_kb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        sequential_cpu_s=sequential_cpu,
        concurrent_cpu_s=concurrent_cpu,
    )


def cpu_s() -> float:
    """CPU seconds this process (all its threads) has used: less moved by a busy machine's
    other work than wall time, though not free of it."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _verify(peer: Peer, refs: list[WorkflowRef | None]) -> None:
    if peer.verify is not None:
        for ref in refs:
            if ref is not None:
                await peer.verify(ref)


async def history_bytes(client: Client, ref: WorkflowRef) -> int:
    """Bytes of every event of the run's workflow, its continuations and its child workflows."""
    total = 0
    pending: list[tuple[str, str | None]] = [(ref.workflow_id, ref.run_id)]
    while pending:
        workflow_id, run_id = pending.pop()
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        async for event in handle.fetch_history_events():
            total += event.ByteSize()
            if event.HasField("child_workflow_execution_started_event_attributes"):
                child = event.child_workflow_execution_started_event_attributes.workflow_execution
                pending.append((child.workflow_id, child.run_id))
            if event.HasField("workflow_execution_continued_as_new_event_attributes"):
                attributes = event.workflow_execution_continued_as_new_event_attributes
                pending.append((workflow_id, attributes.new_execution_run_id))
    return total


def check_answer(answer: object, expected: str) -> None:
    """Fail the measurement when a run's answer shows it skipped tool results."""
    if answer != expected:
        raise PeerError(f"The run answered {answer!r}, expected {expected!r}.")
