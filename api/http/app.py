"""The FastAPI application; its lifespan owns the Temporal client and the Postgres pool."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI
from starlette.routing import Route

from keel.api.a2a.routes import a2a_routes
from keel.api.agui import router as agui_router
from keel.api.console import pages_router, sign_in_router
from keel.api.core.assembly import open_service
from keel.api.http.body_limit import BodySizeLimit
from keel.api.http.client_errors import ClientErrorLog, quiet_a2a_client_errors
from keel.api.http.codec_cors import CodecCors, codec_origins
from keel.api.http.errors import install_error_handlers
from keel.api.http.metrics import ApiMetrics, RequestMetrics, serving_metrics
from keel.api.http.request_tracing import trace_requests
from keel.api.http.routers import (
    admin,
    auth_exchange,
    codec,
    evals,
    events,
    inbox,
    interactions,
    quotas,
    routing,
    runs,
    schedule_preview,
    schedules,
    sessions,
    system,
    tool_outputs,
    usage,
    webhooks,
)
from keel.api.http.routers.coordinations import router as coordinations_router
from keel.api.http.routers.grants import router as grants_router
from keel.api.http.routers.memories import admin_router as memories_admin_router
from keel.api.http.routers.memories import router as memories_router
from keel.api.http.routers.originals import router as originals_router
from keel.api.langgraph import router as langgraph_router
from keel.api.mcp_server import McpEndpoint
from keel.api.mcp_server.auth_discovery import discovery_routes
from keel.worker.config.settings import Settings

# A request waits at most this long for a database connection: while Postgres is
# away it is answered 503 in seconds instead of hanging.
API_STORE_WAIT_S = 3.0


def create_app(settings: Settings) -> FastAPI:
    if settings.temporal_address is None or settings.database_url is None:
        raise RuntimeError("create_app needs TEMPORAL_ADDRESS and DATABASE_URL resolved.")
    mcp = McpEndpoint(settings)
    metrics = ApiMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_service(settings, store_wait_s=API_STORE_WAIT_S) as service:
            app.state.service = service  # the one thing every route holds
            async with mcp.serving(service), AsyncExitStack() as extra:
                if settings.api_metrics_port is not None:
                    await extra.enter_async_context(
                        serving_metrics(
                            metrics,
                            service.inbox.pending_by_tenant,
                            settings.metrics_host,
                            settings.api_metrics_port,
                        )
                    )
                yield

    app = FastAPI(
        title="Keel",
        version="0.1.0",
        description="A durable orchestrator for LLM agents on Temporal.",
        lifespan=lifespan,
    )
    app.include_router(system.router)
    app.include_router(auth_exchange.router)
    app.include_router(runs.router)
    app.include_router(events.router)
    app.include_router(interactions.router)
    app.include_router(sessions.router)
    app.include_router(admin.router)
    app.include_router(routing.admin_router)
    app.include_router(routing.runs_router)
    app.include_router(codec.router)
    app.include_router(schedule_preview.router)
    app.include_router(schedules.router)
    app.include_router(webhooks.router)
    app.include_router(evals.router)
    app.include_router(inbox.router)
    app.include_router(tool_outputs.router)
    app.include_router(usage.router)
    app.include_router(quotas.admin_router)
    app.include_router(quotas.usage_router)
    app.include_router(memories_router)
    app.include_router(memories_admin_router)
    app.include_router(sign_in_router)
    app.include_router(langgraph_router)
    app.include_router(agui_router)
    app.include_router(coordinations_router)
    app.include_router(grants_router)
    app.include_router(originals_router)
    app.router.routes.extend(a2a_routes(app.state, base_url=settings.public_url or ""))
    app.router.routes.append(Route("/mcp", endpoint=mcp))
    app.router.routes.extend(discovery_routes(settings))
    app.include_router(pages_router)  # last: its catch-all serves every console path
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(ClientErrorLog)
    app.add_middleware(
        CodecCors, origins=codec_origins(settings.codec_cors_origins, settings.temporal_ui_port)
    )
    quiet_a2a_client_errors()
    if settings.api_metrics_port is not None:
        app.add_middleware(RequestMetrics, metrics=metrics)
    install_error_handlers(app)
    trace_requests(app, settings)
    return app
