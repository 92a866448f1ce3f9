"""A server span per API request, parent of the runs the request starts.

FastAPI's OpenTelemetry instrumentation, on only when tracing is configured; the
Temporal client's plugin carries the request's context into the run's headers.
"""

from __future__ import annotations

from fastapi import FastAPI

from keel.worker.config.settings import Settings
from keel.worker.observability.tracing import install_tracing


def trace_requests(app: FastAPI, settings: Settings) -> None:
    provider = install_tracing(settings, "keel-api")
    if provider is None:
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    # The ASGI send/receive spans would double the count of spans and say nothing.
    FastAPIInstrumentor.instrument_app(
        app, tracer_provider=provider, exclude_spans=["receive", "send"]
    )
