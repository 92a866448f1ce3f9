"""Spans in the OpenTelemetry GenAI conventions: `invoke_agent`, `chat`, `execute_tool`.

A worker interceptor, installed only when tracing is on
(`keel.worker.observability.tracing`), so the workflow and activity code stay as they
are and an untraced worker does nothing extra. It sits inside Temporal's
`OpenTelemetryPlugin`, which has already attached the context the caller passed in the headers:

- `invoke_agent {agent}` spans a run's workflow, from its first workflow task to
  its last. The tracer is Temporal's replay-safe one: the span's id comes from the
  workflow's deterministic random, and it does not end while history replays, so a
  worker that takes a run over (and replays it) neither doubles it nor breaks the
  parentage of the spans recorded before.
- `chat {model}` spans each model call and `execute_tool {tool}` each tool call;
  they run in activities, under the run's span through the activity headers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue
from temporalio import activity, workflow
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from keel.activities.llm.genai_spans import CAPTURE_CONTENT
from keel.workflows.run.models import RunInput, RunResult
from keel.workflows.run.step_models import LlmStepInput, LlmStepResult, ToolCallInput, ToolDigest

__all__ = ["GenAiSpans"]

TRACER = "keel"
PROVIDER = "openai"  # the OpenAI-compatible chat completions API, whoever serves it
TOOL_ACTIVITIES = {"run_tool": "function", "run_mcp_tool": "extension"}


class GenAiSpans(Interceptor):
    """The worker interceptor; `capture_content` puts model messages on `chat` spans."""

    def __init__(self, *, capture_content: bool = False) -> None:
        self._capture_content = capture_content

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivitySpans(next, self._capture_content)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _RunSpan


class _ActivitySpans(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, capture_content: bool) -> None:
        super().__init__(next)
        self._capture_content = capture_content

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        arg = input.args[0] if input.args else None
        if isinstance(arg, LlmStepInput):
            return await self._chat(input, arg)
        if isinstance(arg, ToolCallInput):
            return await self._tool(input, arg)
        return await super().execute_activity(input)

    async def _chat(self, input: ExecuteActivityInput, step: LlmStepInput) -> Any:
        tracer = trace.get_tracer(TRACER)
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.request.model": step.model,
            "gen_ai.conversation.id": step.session_id or step.run_id,
            "keel.run.id": step.run_id,
            "keel.step": step.step,
        }
        with tracer.start_as_current_span(
            f"chat {step.model}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            token = CAPTURE_CONTENT.set(self._capture_content)
            try:
                result = await super().execute_activity(input)
            except BaseException as err:
                span.set_attribute("error.type", type(err).__name__)
                raise
            finally:
                CAPTURE_CONTENT.reset(token)
            if isinstance(result, LlmStepResult):
                usage = result.spent()
                span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
            return result

    async def _tool(self, input: ExecuteActivityInput, call: ToolCallInput) -> Any:
        tracer = trace.get_tracer(TRACER)
        activity_type = activity.info().activity_type
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.call_id,
            "gen_ai.tool.type": TOOL_ACTIVITIES.get(activity_type, "function"),
            "keel.run.id": call.run_id,
            "keel.step": call.step,
        }
        with tracer.start_as_current_span(
            f"execute_tool {call.name}", kind=SpanKind.INTERNAL, attributes=attributes
        ) as span:
            try:
                result = await super().execute_activity(input)
            except BaseException as err:
                span.set_attribute("error.type", type(err).__name__)
                raise
            if isinstance(result, ToolDigest) and result.is_error:
                # The model sees the error and may correct it; the call itself worked.
                span.set_attribute("error.type", "tool_error")
                span.set_status(Status(StatusCode.ERROR, "the tool answered with an error"))
            return result


class _RunSpan(WorkflowInboundInterceptor):
    """`invoke_agent {agent}` around a run; a continued run stays under the first span."""

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        run = input.args[0] if input.args else None
        if not isinstance(run, RunInput) or run.state is not None:
            return await super().execute_workflow(input)
        tracer = trace.get_tracer(TRACER)
        run_id = run.run_id or workflow.info().workflow_id
        span = tracer.start_span(
            f"invoke_agent {run.agent.name}",
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": PROVIDER,
                "gen_ai.agent.name": run.agent.name,
                "gen_ai.request.model": run.model,
                "gen_ai.conversation.id": run.session_id or run_id,
                "keel.run.id": run_id,
                "keel.tenant": run.tenant_id,
                "keel.trigger": run.trigger,
            },
        )
        # Ended by hand: an exception that only fails the workflow task (a bug, a
        # nondeterminism) must leave the span open for the task's retry, and a run
        # evicted from the cache (GeneratorExit) is not over.
        with _attached(trace.set_span_in_context(span)):
            try:
                result = await super().execute_workflow(input)
            except workflow.ContinueAsNewError:
                span.end()
                raise
            except GeneratorExit:
                raise
            except BaseException as err:
                if _cancelled(err) or workflow.is_failure_exception(err):
                    span.set_attribute("error.type", type(err).__name__)
                    span.set_status(Status(StatusCode.ERROR, str(err)[:200]))
                    span.end()
                raise
            if isinstance(result, RunResult):
                span.set_attribute("gen_ai.usage.input_tokens", result.usage.prompt_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", result.usage.completion_tokens)
                span.set_attribute("keel.run.status", result.status)
            span.end()
            return result


@contextmanager
def _attached(context: Context) -> Iterator[None]:
    """Attach for the block; skip the detach where it cannot apply.

    An evicted workflow's coroutine is closed wherever garbage collection runs, in
    another `contextvars.Context`, where the token is not valid (Temporal's
    `contrib.opentelemetry` does the same for its own contexts).
    """
    token = otel_context.attach(context)
    try:
        yield
    finally:
        if otel_context.get_current() is context:
            with suppress(ValueError):
                token.var.reset(token)


def _cancelled(err: BaseException) -> bool:
    return isinstance(err, asyncio.CancelledError)
