"""JSON log lines: the run, the tenant and the trace on each, secrets masked."""

from __future__ import annotations

import json
import logging

from opentelemetry.sdk.trace import TracerProvider

from keel.worker.observability.log_format import (
    LOG_CONTEXT,
    JsonLogFormatter,
    mask_secrets,
    set_log_context,
)


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord("keel.test", logging.WARNING, __file__, 1, message, args, None)
    for key, value in extra.items():
        setattr(rec, key, value)
    return rec


def test_a_line_names_the_run_tenant_and_trace() -> None:
    formatter = JsonLogFormatter()
    token = LOG_CONTEXT.set(None)
    try:
        set_log_context(tenant="acme")
        tracer = TracerProvider().get_tracer("test")
        with tracer.start_as_current_span("request") as span:
            line = json.loads(
                formatter.format(
                    record("step %d done", 3, temporal_activity={"workflow_id": "run-7"})
                )
            )
        assert line["message"] == "step 3 done"
        assert line["level"] == "warning" and line["logger"] == "keel.test"
        assert line["run_id"] == "run-7" and line["tenant"] == "acme"
        assert line["trace_id"] == f"{span.get_span_context().trace_id:032x}"
    finally:
        LOG_CONTEXT.reset(token)


def test_no_context_means_no_fields_and_secrets_are_masked() -> None:
    line = json.loads(
        JsonLogFormatter().format(
            record("calling %s with Bearer %s", "postgresql://keel:hunter2@db/keel", "eyJabc.def")
        )
    )
    assert "run_id" not in line and "tenant" not in line and "trace_id" not in line
    assert "hunter2" not in line["message"] and "eyJabc" not in line["message"]
    assert mask_secrets("Authorization: bearer tok123") == "Authorization: bearer ***"
