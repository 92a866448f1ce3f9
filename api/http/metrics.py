"""The API's Prometheus metrics, served on their own port (`KEEL_API_METRICS_PORT`).

Request counts and latencies by route template (never the raw path, so ids do not
become labels) and the interactions waiting for a person, by tenant, read from
Postgres at each scrape. A port of its own keeps `/metrics` off the public
listener, where it would need Keel's authentication.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PendingCounts = Callable[[], Awaitable[dict[str, int]]]
"""How many interactions wait for a person, per tenant (`KeelService.inbox`)."""


__all__ = ["ApiMetrics", "RequestMetrics", "serving_metrics"]


class ApiMetrics:
    """One registry per app, so two apps in a process (tests, `keel up`) do not mix."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "keel_api_requests",
            "API requests by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "keel_api_request_seconds",
            "API request latency by method and route template.",
            ["method", "route"],
            registry=self.registry,
        )
        self.pending = Gauge(
            "keel_pending_interactions",
            "Approvals and questions waiting for a person, by tenant.",
            ["tenant"],
            registry=self.registry,
        )

    async def render(self, pending_by_tenant: PendingCounts) -> bytes:
        counts = await pending_by_tenant()
        self.pending.clear()
        for tenant, count in counts.items():
            self.pending.labels(tenant=tenant).set(count)
        return generate_latest(self.registry)


class RequestMetrics:
    """ASGI middleware: count and time each HTTP request once it has been answered."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self._app = app
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        status = 500
        started = time.perf_counter()

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self._app(scope, receive, send_status)
        finally:
            method = str(scope.get("method", ""))
            route = _route_of(scope)
            self._metrics.requests.labels(method=method, route=route, status=str(status)).inc()
            self._metrics.latency.labels(method=method, route=route).observe(
                time.perf_counter() - started
            )


def _route_of(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path  # FastAPI's template, e.g. /v1/runs/{run_id}
    if scope.get("endpoint") is not None:
        return str(scope.get("path", ""))  # a plain Starlette route: a fixed path
    return "unmatched"


@asynccontextmanager
async def serving_metrics(
    metrics: ApiMetrics, pending_by_tenant: PendingCounts, host: str, port: int
) -> AsyncIterator[None]:
    """Serve `/metrics` on `host:port` until the context exits."""

    async def endpoint(request: Request) -> Response:
        return Response(await metrics.render(pending_by_tenant), media_type=CONTENT_TYPE_LATEST)

    app = Starlette(routes=[Route("/metrics", endpoint)])
    server = uvicorn.Server(
        uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(250):
            if server.started or task.done():
                break
            await asyncio.sleep(0.02)
        if not server.started:
            if task.done():
                task.result()
            raise RuntimeError(f"The API's metrics could not listen on {host}:{port}.")
        yield
    finally:
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)
