"""The worker's metrics: Temporal's own and Keel's, on one Prometheus endpoint.

Temporal's SDK runtime serves `/metrics` on `KEEL_WORKER_METRICS_PORT` (its worker,
workflow-task and activity metrics). Keel's are recorded through the same runtime's
meter by a worker interceptor, so they are served there too, and those recorded in
the workflow (runs started and finished) are skipped while history replays: a run
taken over by another worker is not counted twice. Unset, no runtime endpoint and
no interceptor exist.

Keel's metrics (Prometheus names):

- `keel_runs_started_total{agent,tenant,trigger}`, `keel_runs_finished_total{agent,status}`
- `keel_model_calls_total{model,outcome}`, `keel_model_tokens_total{model,kind}`,
  `keel_model_cost_usd{model}` (a histogram: `_sum` is the spend), `keel_model_latency_ms`
- `keel_tool_calls_total{tool,outcome}` (`ok`, `error` the model sees, `failed`)
- `keel_approval_wait_ms{tool,status}`: from the request to its decision or expiry
- `keel_compactions_total{model,reason}`: conversations summarised to fit the window,
  `threshold` (the estimate crossed it) or `refused` (the provider said too long)
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity, workflow
from temporalio.common import MetricMeter
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from keel.activities.llm.prices import ModelPrice
from keel.worker.config.settings import Settings
from keel.workflows.context.models import CompactionInput, CompactionResult
from keel.workflows.interactions.models import ResolveInteractionInput
from keel.workflows.run.models import RunInput, RunResult
from keel.workflows.run.step_models import LlmStepInput, LlmStepResult, ToolCallInput, ToolDigest

__all__ = ["KeelMetrics", "worker_runtime"]


def worker_runtime(settings: Settings) -> Runtime | None:
    """A Temporal runtime serving Prometheus metrics, or None to keep the default."""
    if settings.worker_metrics_port is None:
        return None
    address = f"{settings.metrics_host}:{settings.worker_metrics_port}"
    return Runtime(
        telemetry=TelemetryConfig(
            metrics=PrometheusConfig(bind_address=address, counters_total_suffix=True)
        )
    )


class KeelMetrics(Interceptor):
    """Counts what runs do; installed on a worker whose runtime serves metrics."""

    def __init__(self, prices: dict[str, ModelPrice]) -> None:
        self._prices = prices

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityMetrics(next, self._prices)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _RunMetrics


class _ActivityMetrics(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, prices: dict[str, ModelPrice]) -> None:
        super().__init__(next)
        self._prices = prices

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        arg = input.args[0] if input.args else None
        if isinstance(arg, LlmStepInput):
            return await self._model_call(input, arg)
        if isinstance(arg, ToolCallInput):
            return await self._tool_call(input, arg)
        result = await super().execute_activity(input)
        if isinstance(arg, ResolveInteractionInput):
            self._approval(arg)
        elif isinstance(arg, CompactionInput) and isinstance(result, CompactionResult):
            self._compaction(arg)
        return result

    async def _model_call(self, input: ExecuteActivityInput, step: LlmStepInput) -> Any:
        meter = _meter()
        model = {"model": step.model}
        try:
            result = await super().execute_activity(input)
        except BaseException:
            meter.create_counter("keel_model_calls").with_additional_attributes(
                {**model, "outcome": "failed"}
            ).add(1)
            raise
        meter.create_counter("keel_model_calls").with_additional_attributes(
            {**model, "outcome": "ok"}
        ).add(1)
        if isinstance(result, LlmStepResult):
            usage = result.spent()
            tokens = meter.create_counter("keel_model_tokens", unit="tokens")
            tokens.with_additional_attributes({**model, "kind": "input"}).add(usage.prompt_tokens)
            tokens.with_additional_attributes({**model, "kind": "output"}).add(
                usage.completion_tokens
            )
            price = self._prices.get(step.model)
            cost = price.cost(usage.prompt_tokens, usage.completion_tokens) if price else 0.0
            meter.create_histogram_float("keel_model_cost_usd").with_additional_attributes(
                model
            ).record(cost)
            meter.create_histogram("keel_model_latency_ms").with_additional_attributes(
                model
            ).record(result.latency_ms)
        return result

    async def _tool_call(self, input: ExecuteActivityInput, call: ToolCallInput) -> Any:
        calls = _meter().create_counter("keel_tool_calls")
        try:
            result = await super().execute_activity(input)
        except BaseException:
            calls.with_additional_attributes({"tool": call.name, "outcome": "failed"}).add(1)
            raise
        outcome = "error" if isinstance(result, ToolDigest) and result.is_error else "ok"
        calls.with_additional_attributes({"tool": call.name, "outcome": outcome}).add(1)
        return result

    def _approval(self, request: ResolveInteractionInput) -> None:
        interaction = request.interaction
        ended = interaction.decided_at or interaction.expires_at
        waited_ms = max(0, int((ended - interaction.created_at).total_seconds() * 1000))
        _meter().create_histogram("keel_approval_wait_ms").with_additional_attributes(
            {"tool": interaction.tool, "status": interaction.status}
        ).record(waited_ms)

    def _compaction(self, job: CompactionInput) -> None:
        # Counted where the summary was made: the workflow's interceptor sees only the run.
        reason = "refused" if job.need.refused else "threshold"
        _meter().create_counter("keel_compactions").with_additional_attributes(
            {"model": job.model, "reason": reason}
        ).add(1)


def _meter() -> MetricMeter:
    return activity.metric_meter()


class _RunMetrics(WorkflowInboundInterceptor):
    """Runs started and finished; the workflow's meter records nothing during replay."""

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        run = input.args[0] if input.args else None
        if not isinstance(run, RunInput):
            return await super().execute_workflow(input)
        meter = workflow.metric_meter()
        if run.state is None:
            meter.create_counter("keel_runs_started").with_additional_attributes(
                {"agent": run.agent.name, "tenant": run.tenant_id, "trigger": run.trigger}
            ).add(1)
        finished = meter.create_counter("keel_runs_finished")
        agent = run.agent.name
        try:
            result = await super().execute_workflow(input)
        except workflow.ContinueAsNewError:
            raise
        except GeneratorExit:
            raise
        except asyncio.CancelledError:
            finished.with_additional_attributes({"agent": agent, "status": "cancelled"}).add(1)
            raise
        except BaseException as err:
            if workflow.is_failure_exception(err):
                finished.with_additional_attributes({"agent": agent, "status": "failed"}).add(1)
            raise
        if isinstance(result, RunResult):
            finished.with_additional_attributes({"agent": agent, "status": result.status}).add(1)
        return result
