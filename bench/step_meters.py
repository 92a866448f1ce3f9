"""Meters for `bench.step_profile`: Postgres round trips and bytes, activities, activations.

Installed over the worker in this process for the length of a measurement, never
in Keel itself:

- `SqlMeter` counts every statement the worker sends (by its activity and its SQL
  text, with the bytes of query and parameters) and every round trip: a wait on the
  connection that ended with data from the server, so a pipeline of statements and
  its one sync count once, as Postgres sees them.
- `ActivityMeter`, a worker interceptor, times each activity's execution (wall).
- `ActivationMeter` times each workflow activation (the workflow's code, run in the
  worker's thread pool) and can profile them with `cProfile`, as the event loop is.
"""

from __future__ import annotations

import cProfile
import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
import psycopg.waiting
from psycopg.types.json import Jsonb
from temporalio import activity
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    _workflow_instance,
)

READY_R = 1
"""`psycopg.waiting.Ready.R`: the socket had data from the server."""
OUTSIDE = "(no activity)"


def current_activity() -> str:
    return activity.info().activity_type if activity.in_activity() else OUTSIDE


def param_bytes(params: Any) -> int:
    """About the bytes parameters take on the wire (text format)."""
    if params is None:
        return 0
    values = params.values() if isinstance(params, dict) else params
    total = 0
    for value in values:
        if value is None:
            continue
        if isinstance(value, Jsonb):
            total += len(json.dumps(value.obj, ensure_ascii=False).encode())
        elif isinstance(value, bytes):
            total += len(value)
        else:
            total += len(str(value).encode())
    return total


@dataclass
class StatementStats:
    calls: int = 0
    pipelined: int = 0
    """Calls sent inside a pipeline (which shares one sync with its other statements)."""
    sent_bytes: int = 0
    sample: tuple[str, Any] | None = None
    """One query and its parameters, for EXPLAIN ANALYZE."""


@dataclass
class SqlMeter:
    """Statements and round trips of the worker's Postgres connections."""

    statements: dict[tuple[str, str], StatementStats] = field(
        default_factory=lambda: defaultdict(StatementStats)
    )
    round_trips: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """Waits on a connection that ended with data from the server: every statement sent
    alone counts one, BEGIN and COMMIT too; a pipeline one or more (its results can
    arrive apart)."""
    pipelines: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    on: bool = False

    def reset(self) -> None:
        self.statements.clear()
        self.round_trips.clear()
        self.pipelines.clear()

    def sync_points(self) -> dict[str, int]:
        """Statements sent alone plus pipelines, by activity: the round trips at least."""
        out: dict[str, int] = defaultdict(int)
        for (kind, _), stats in self.statements.items():
            out[kind] += stats.calls - stats.pipelined
        for kind, count in self.pipelines.items():
            out[kind] += count
        return out

    @contextmanager
    def installed(self) -> Iterator[None]:
        cursor = psycopg.AsyncCursor
        original_execute = cursor.execute
        original_wait = psycopg.waiting.wait_async
        meter = self

        async def execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
            if meter.on:
                text = query if isinstance(query, str) else query.as_string(self.connection)
                stats = meter.statements[(current_activity(), text)]
                stats.calls += 1
                stats.pipelined += self.connection._pipeline is not None
                stats.sent_bytes += len(text.encode()) + param_bytes(params)
                if stats.sample is None:
                    stats.sample = (text, params)
            return await original_execute(self, query, params, **kwargs)

        async def wait_async(gen: Any, fileno: int, *args: Any, **kwargs: Any) -> Any:
            if not meter.on:
                return await original_wait(gen, fileno, *args, **kwargs)
            seen = [False]
            result = await original_wait(_reads(gen, seen), fileno, *args, **kwargs)
            if seen[0]:
                meter.round_trips[current_activity()] += 1
            return result

        pipeline = psycopg.AsyncPipeline
        original_enter = pipeline.__aenter__

        async def enter(self: Any) -> Any:
            if meter.on:
                meter.pipelines[current_activity()] += 1
            return await original_enter(self)

        cursor.execute = execute  # type: ignore[method-assign,assignment]
        psycopg.waiting.wait_async = wait_async  # type: ignore[assignment]
        pipeline.__aenter__ = enter  # type: ignore[method-assign]
        try:
            yield
        finally:
            cursor.execute = original_execute  # type: ignore[method-assign]
            psycopg.waiting.wait_async = original_wait
            pipeline.__aenter__ = original_enter  # type: ignore[method-assign]


def _reads(gen: Generator[Any, Any, Any], seen: list[bool]) -> Generator[Any, Any, Any]:
    """`gen`, noting whether the server sent anything while it ran."""
    try:
        state = next(gen)
        while True:
            ready = yield state
            if ready and ready & READY_R:
                seen[0] = True
            state = gen.send(ready)
    except StopIteration as stop:
        return stop.value


@dataclass
class ActivityMeter(Interceptor):
    """Wall time of each activity's execution, by activity type."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    on: bool = False

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _TimedActivity(next, self)


class _TimedActivity(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, meter: ActivityMeter) -> None:
        super().__init__(next)
        self._meter = meter

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        started = time.perf_counter()
        try:
            return await super().execute_activity(input)
        finally:
            if self._meter.on:
                kind = activity.info().activity_type
                self._meter.seconds[kind] += time.perf_counter() - started
                self._meter.calls[kind] += 1


@dataclass
class ActivationMeter:
    """Workflow activations: how many, their wall time, and optionally a profile of them."""

    count: int = 0
    seconds: float = 0.0
    profile: cProfile.Profile | None = None
    on: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        self.count = 0
        self.seconds = 0.0

    @contextmanager
    def installed(self) -> Iterator[None]:
        impl = _workflow_instance._WorkflowInstanceImpl
        original: Callable[..., Any] = impl.activate
        meter = self

        def activate(self: Any, act: Any) -> Any:
            if not meter.on:
                return original(self, act)
            with meter._lock:  # one profiler, one thread at a time
                started = time.perf_counter()
                if meter.profile is not None:
                    meter.profile.enable()
                try:
                    return original(self, act)
                finally:
                    if meter.profile is not None:
                        meter.profile.disable()
                    meter.seconds += time.perf_counter() - started
                    meter.count += 1

        impl.activate = activate  # type: ignore[method-assign]
        try:
            yield
        finally:
            impl.activate = original  # type: ignore[method-assign]
