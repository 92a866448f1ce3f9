"""The settings of what Keel tells its operators: logs, metrics and traces.

A part of `Settings` (which inherits them), kept in a room of its own; see
docs/operations.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["TelemetrySettings"]


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class TelemetrySettings(BaseSettings):
    """How Keel logs, where its metrics listen and where its traces go."""

    model_config = SettingsConfigDict(extra="ignore")

    # -- operations: logs -----------------------------------------------------------
    log_format: Literal["text", "json"] = Field(
        default="text",
        validation_alias=_env("KEEL_LOG_FORMAT"),
        description="`json`: one object a line with run_id, tenant and trace_id.",
    )

    # -- operations: metrics --------------------------------------------------------
    metrics_host: str = Field(
        default="127.0.0.1",
        validation_alias=_env("KEEL_METRICS_HOST"),
        description="Address the /metrics endpoints listen on (0.0.0.0 in a container).",
    )
    worker_metrics_port: int | None = Field(
        default=None,
        validation_alias=_env("KEEL_WORKER_METRICS_PORT"),
        description="Port of the worker's /metrics (Temporal's and Keel's); unset: none.",
    )
    api_metrics_port: int | None = Field(
        default=None,
        validation_alias=_env("KEEL_API_METRICS_PORT"),
        description="Port of the API's /metrics (requests, pending interactions); unset: none.",
    )

    # -- operations: traces (the standard OpenTelemetry variables) ----------------
    otel_exporter_otlp_endpoint: str | None = Field(
        default=None,
        validation_alias=_env("OTEL_EXPORTER_OTLP_ENDPOINT"),
        description="OTLP/HTTP collector base URL; traces go to its /v1/traces. Unset: no traces.",
    )
    otel_exporter_otlp_traces_endpoint: str | None = Field(
        default=None,
        validation_alias=_env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        description="Full OTLP/HTTP traces URL; wins over OTEL_EXPORTER_OTLP_ENDPOINT.",
    )
    otel_exporter_otlp_headers: SecretStr | None = Field(
        default=None,
        validation_alias=_env("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"),
        description="Headers for the collector, `key=value,key2=value2` (often a token).",
    )
    otel_traces_exporter: str = Field(
        default="otlp",
        validation_alias=_env("OTEL_TRACES_EXPORTER"),
        description="`otlp`, or `none` to keep traces off with an endpoint set.",
    )
    otel_sdk_disabled: bool = Field(default=False, validation_alias=_env("OTEL_SDK_DISABLED"))
    otel_service_name: str | None = Field(
        default=None,
        validation_alias=_env("OTEL_SERVICE_NAME"),
        description="Service name on spans; default `keel-api` or `keel-worker`.",
    )
    otel_capture_message_content: bool = Field(
        default=False,
        validation_alias=_env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"),
        description="Put model messages on `chat` spans; off, spans carry no contents.",
    )

    @property
    def traces_endpoint(self) -> str | None:
        """Where spans go, or None when tracing is off."""
        if self.otel_sdk_disabled or self.otel_traces_exporter.strip().lower() == "none":
            return None
        if self.otel_exporter_otlp_traces_endpoint:
            return self.otel_exporter_otlp_traces_endpoint
        if self.otel_exporter_otlp_endpoint:
            return self.otel_exporter_otlp_endpoint.rstrip("/") + "/v1/traces"
        return None
