"""Traces: Temporal's replay-safe OpenTelemetry integration, set up from `Settings`.

Off (no `OTEL_EXPORTER_OTLP_*` endpoint) nothing here is imported by the rest of
Keel beyond `temporal_plugins`, which then answers an empty list: no provider, no
exporter, no interceptor, so a step does no tracing work at all.

On, one process-wide tracer provider (Temporal's `create_tracer_provider`, whose
span ids come from the workflow's deterministic random and whose spans do not end
while history replays) exports over OTLP/HTTP in batches. Clients carry Temporal's
`OpenTelemetryPlugin`, which passes the caller's context in workflow and activity
headers, so a run's spans sit under the API request that started it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keel.worker.config.settings import Settings

if TYPE_CHECKING:
    from temporalio.client import Plugin
    from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider

__all__ = ["install_tracing", "temporal_plugins", "tracing_on"]


def tracing_on(settings: Settings) -> bool:
    return settings.traces_endpoint is not None


def install_tracing(settings: Settings, service: str) -> ReplaySafeTracerProvider | None:
    """Set the global tracer provider once per process; None when tracing is off.

    A process that runs both the API and a worker (`keel up`, the tests) shares one
    provider: the first caller's service name and endpoint hold.
    """
    endpoint = settings.traces_endpoint
    if endpoint is None:
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from temporalio.contrib.opentelemetry import (
            ReplaySafeTracerProvider,
            create_tracer_provider,
        )
    except ImportError as err:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "Tracing is configured (OTEL_EXPORTER_OTLP_ENDPOINT) but the OpenTelemetry "
            "packages are missing: pip install 'keel[otel]'."
        ) from err

    current = trace.get_tracer_provider()
    if isinstance(current, ReplaySafeTracerProvider):
        return current
    provider = create_tracer_provider(
        resource=Resource.create({"service.name": settings.otel_service_name or service})
    )
    provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(endpoint=endpoint, headers=_headers(settings)),
            schedule_delay_millis=1000,
        )
    )
    trace.set_tracer_provider(provider)
    return provider


def temporal_plugins(settings: Settings) -> list[Plugin]:
    """The plugins a Temporal client gets: Temporal's tracing one when tracing is on."""
    if not tracing_on(settings):
        return []
    from temporalio.contrib.opentelemetry import OpenTelemetryPlugin

    return [OpenTelemetryPlugin()]


def _headers(settings: Settings) -> dict[str, str]:
    raw = settings.otel_exporter_otlp_headers
    if raw is None:
        return {}
    headers: dict[str, str] = {}
    for part in raw.get_secret_value().split(","):
        key, sep, value = part.partition("=")
        if sep and key.strip():
            headers[key.strip()] = value.strip()
    return headers
