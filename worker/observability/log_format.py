"""Structured logs (`KEEL_LOG_FORMAT=json`): one JSON object a line, with the run.

Each line carries the run id, the tenant and the trace id when they are known: the
run from Temporal's workflow and activity loggers, or from `LOG_CONTEXT`, which the
API sets for the caller's tenant and the worker (`LogContext`) for each activity's
run; the trace from the current OpenTelemetry span. Bearer tokens and passwords in
URLs are masked on every line, whatever logged them.
"""

from __future__ import annotations

import json
import logging
import re
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from keel.worker.config.settings import Settings

__all__ = ["LOG_CONTEXT", "JsonLogFormatter", "LogContext", "configure_logging", "mask_secrets"]

LOG_CONTEXT: ContextVar[dict[str, str] | None] = ContextVar("keel_log_context", default=None)
"""`run_id` and `tenant` of what this task works for."""

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+")
_URL_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")


def mask_secrets(text: str) -> str:
    return _URL_PASSWORD.sub(r"\1***@", _BEARER.sub(r"\1***", text))


def set_log_context(**fields: str | None) -> None:
    current = dict(LOG_CONTEXT.get() or {})
    current.update({k: v for k, v in fields.items() if v})
    LOG_CONTEXT.set(current)


class JsonLogFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": mask_secrets(record.getMessage()),
        }
        context = LOG_CONTEXT.get() or {}
        temporal = getattr(record, "temporal_activity", None) or getattr(
            record, "temporal_workflow", None
        )
        run_id = context.get("run_id")
        if run_id is None and isinstance(temporal, dict):
            run_id = temporal.get("workflow_id")
        if run_id:
            line["run_id"] = run_id
        if context.get("tenant"):
            line["tenant"] = context["tenant"]
        trace_id = _trace_id()
        if trace_id:
            line["trace_id"] = trace_id
        if record.exc_info:
            line["exception"] = mask_secrets(self.formatException(record.exc_info))
        return json.dumps(line, default=str)


def _trace_id() -> str | None:
    try:
        from opentelemetry import trace
    except ImportError:  # pragma: no cover - the API package is a dependency
        return None
    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None


class _Masking(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return mask_secrets(super().format(record))


def configure_logging(settings: Settings, level: int = logging.INFO) -> None:
    """The root handler for `keel` commands: text by default, JSON when asked for."""
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonLogFormatter() if settings.log_format == "json" else _Masking(TEXT_FORMAT)
    )
    logging.basicConfig(level=level, handlers=[handler], force=True)


class LogContext(Interceptor):
    """Worker interceptor: an activity's log lines name its run and tenant."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityLogContext(next)


class _ActivityLogContext(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        arg = input.args[0] if input.args else None
        set_log_context(run_id=getattr(arg, "run_id", None), tenant=getattr(arg, "tenant_id", None))
        return await super().execute_activity(input)
