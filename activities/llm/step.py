"""The LLM activity: one chat completion over the conversation kept in Postgres.

The workflow sends a step number and gets back a digest; the conversation is
read from the store and the assistant's message is written back to it, so the
workflow history never carries a transcript.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import httpx
import openai
from temporalio import activity
from temporalio.exceptions import ApplicationError

from keel.activities.context.budget import (
    ContextBudget,
    ContextLengthExceeded,
    openai_message,
)
from keel.activities.heartbeats import with_heartbeats
from keel.activities.llm.chat_stream import DeltaPublisher, collect_stream, stream_chunks
from keel.activities.llm.endpoints import endpoint_for
from keel.activities.llm.genai_spans import (
    note_finish,
    note_messages,
    note_provider,
)
from keel.activities.llm.limits import CallPermit, ProviderLimiter
from keel.activities.llm.prices import ModelPrice
from keel.activities.llm.provider_api import ProviderRef
from keel.activities.llm.providers import anthropic_messages, openai_errors, plugin_models
from keel.activities.llm.providers.anthropic_messages import AnthropicMessages
from keel.activities.llm.step_notes import note_move, waiting
from keel.activities.masking import ReadableCopies, gate_place
from keel.activities.plugin_api import PluginCode
from keel.activities.quotas.activities import QuotaWatch
from keel.activities.run_records import open_run
from keel.activities.store.audit import AuditLog, policy_entry
from keel.activities.store.coverage_store import views_in
from keel.activities.store.mcp_tool_store import McpToolStore
from keel.activities.store.run_store import Store
from keel.activities.store.run_tree import RunTreeStore
from keel.activities.store.step_reads import StepReads, newly_shown
from keel.activities.tool_events import PREVIEW_CHARS, tool_events
from keel.activities.tool_schemas import plugin_tool_definition, tool_definitions
from keel.workflows.activity_refs import LlmCalls
from keel.workflows.context.budget import estimate_message, estimate_tools
from keel.workflows.context.models import CompactionNeed
from keel.workflows.error_types import LLM_REQUEST_REJECTED, LLM_UNAVAILABLE
from keel.workflows.gate.models import GateResult
from keel.workflows.run.step_models import LlmStepInput, LlmStepResult, ToolCallRequest
from keel.workflows.usage.models import Usage

log = logging.getLogger("keel.llm")
NO_LIMITS = ProviderLimiter.none()

T = TypeVar("T")


class LlmActivities(LlmCalls):
    """Chat completions through the `openai` client; retries belong to Temporal."""

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        store: Store,
        audit: AuditLog,
        prices: dict[str, ModelPrice] | None = None,
        budget: ContextBudget | None = None,
        plugins: PluginCode | None = None,
        anthropic: AnthropicMessages | None = None,
        quotas: QuotaWatch | None = None,
        limits: ProviderLimiter | None = None,
        readable: ReadableCopies | None = None,
    ) -> None:
        self._client = client
        self._quotas = quotas
        self._limits = limits
        self._readable = readable or ReadableCopies.off()
        self._store = store
        self._audit = audit
        self._prices = prices or {}
        self._budget = budget
        self._plugins = plugins
        self._anthropic = anthropic
        self._mcp_tools = McpToolStore(store.pool)
        self._runs = RunTreeStore(store.pool)
        self._reads = StepReads(store.pool)

    @activity.defn(name="llm_step")
    async def llm_step(self, step: LlmStepInput) -> LlmStepResult:
        if step.start is not None:
            await open_run(self._store, step.start)
        await self._store_gate_results(step.tenant_id, step.run_id, step.gate_results)
        await self._audit_denials(step)
        if step.nudge:
            await self._store.put_user_message(step.run_id, step.step, 0, step.nudge)
        budget = self._budget if self._budget is not None and self._budget.enabled else None
        # One round trip: the budget's inputs and the conversation, without what a
        # compaction summary covers (the summary stands for it).
        read = await self._reads.before_call(
            step.run_id, step.session_id, step.model, budget=budget is not None
        )
        inputs = read.inputs
        # Masked outputs are masked in what Keel keeps; the model reads their originals.
        history = await self._readable.for_model(step.run_id, read.history)
        if any(m.step == step.step and m.role == "assistant" for m in history):
            # An earlier attempt finished this call and a crash lost only its result:
            # answer from the record rather than pay for (and diverge on) a second call.
            recorded = await self._store.recorded_call(step.run_id, step.step)
            if recorded is not None:
                # The stored calls are the readable copy: the workflow gets the originals.
                mine = next(m for m in history if m.step == step.step and m.role == "assistant")
                recorded.tool_calls = mine.tool_calls or recorded.tool_calls
                usage = Usage(
                    prompt_tokens=recorded.prompt_tokens,
                    completion_tokens=recorded.completion_tokens,
                )
                cost = self._cost(step.model, usage)
                return _digest(recorded.tool_calls, usage, recorded.latency_ms, cost)
        tools = tool_definitions(tuple(step.tools)) if step.tools else []
        if step.mcp:
            # Discovered at the run's start; the history carries only their names.
            tools = tools + [t.definition() for t in await self._mcp_tools.for_run(step.run_id)]
        if step.plugin_tools:
            tools = tools + self._plugin_tool_definitions(step.plugin_tools)
        messages = [openai_message(m) for m in history]
        estimated = 0
        if budget is not None and inputs is not None:
            # Caps, pruning and the decision to compact: made here and returned, so the
            # workflow only follows what this activity recorded.
            request = await budget.plan(
                inputs=inputs,
                model=step.model,
                agent_window=step.context_window,
                history=history,
                tools=tools,
            )
            if request.plan.needs_compaction:
                level = budget.next_level(
                    request.inputs,
                    step.step,
                    refused=False,
                    estimate=request.plan.estimate,
                    window=request.window,
                )
                need = CompactionNeed(
                    level=level,
                    estimate=request.plan.estimate,
                    window=request.window.context_window,
                )
                return LlmStepResult(compact=need)
            messages, estimated = request.plan.messages, request.plan.raw
        await note_move(self._store, step)
        where = endpoint_for(step.model, self._client, self._anthropic, self._plugins)
        base_url, api_key = where if self._limits is not None else (None, None)
        try:
            # Under a provider's limit the call first waits its turn (`activities.llm.limits`).
            async with (self._limits or NO_LIMITS).call(
                base_url,
                api_key,
                lambda: estimated or sum(map(estimate_message, messages)) + estimate_tools(tools),
                waiting(self._store, step, str(base_url)),
            ) as permit:
                started = time.monotonic()
                message, usage, finish_reason = await with_heartbeats(
                    self._complete(step, messages, tools, permit)
                )
                permit.used(usage.prompt_tokens + usage.completion_tokens)
        except ContextLengthExceeded as refusal:
            return await self._refused(step, refusal)
        latency_ms = int((time.monotonic() - started) * 1000)
        note_finish(finish_reason)
        note_messages(messages, message)
        content = message["content"]
        tool_calls = message["tool_calls"] if step.tool_choice == "auto" else []
        cost = self._cost(step.model, usage)
        await self._store.record_assistant(
            run_id=step.run_id,
            step=step.step,
            content=content,
            tool_calls=await self._readable.model_calls(
                step.tenant_id, step.run_id, step.step, tool_calls
            ),
            model=step.model,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            latency_ms=latency_ms,
            attempt=activity.info().attempt,
            finish_reason=finish_reason,
            event_seq=step.event_seq,
            cost_usd=cost,
            estimated_tokens=estimated,
            # The coverage ledger: the lines of each file this request showed the model.
            views=views_in(step.run_id, newly_shown(history, messages, step.step)),
            moved=step.moved,
        )
        digest = _digest(tool_calls, usage, latency_ms, cost)
        if self._quotas is not None:  # counted with the call: has the tenant reached a quota?
            digest.over_quota = await self._quotas.over(step.run_id, step.tenant_id)
        return digest

    def _plugin_tool_definitions(self, names: list[str]) -> list[dict[str, Any]]:
        """The plugin tools this worker has; one it lacks is not offered (the gate refuses it)."""
        found = [self._plugins.tool(n) for n in names] if self._plugins is not None else []
        return [plugin_tool_definition(tool) for tool in found if tool is not None]

    async def _refused(self, step: LlmStepInput, refusal: ContextLengthExceeded) -> LlmStepResult:
        """A provider said the request was too long: learn its window, compact harder."""
        budget = self._budget
        if budget is None or not budget.enabled:
            raise ApplicationError(
                f"LLM provider rejected the request as too long: {refusal}",
                type=LLM_REQUEST_REJECTED,
                non_retryable=True,
            )
        if refusal.limit is not None:
            await budget.store.learn_window(step.model, refusal.limit, step.run_id)
        inputs = await budget.store.budget_inputs(step.run_id, step.model)
        window = budget.window(step.model, step.context_window, inputs)
        log.warning(
            "%s step %s: the provider refused the request as too long (%s); compacting",
            step.run_id,
            step.step,
            refusal,
        )
        level = budget.next_level(
            inputs, step.step, refused=True, estimate=refusal.size or 0, window=window
        )
        need = CompactionNeed(
            level=level,
            estimate=refusal.size or 0,
            window=refusal.limit or window.context_window,
            refused=True,
        )
        return LlmStepResult(compact=need)

    def _cost(self, model: str, usage: Usage) -> float:
        price = self._prices.get(model)
        return price.cost(usage.prompt_tokens, usage.completion_tokens) if price else 0.0

    async def _audit_denials(self, step: LlmStepInput) -> None:
        for result in step.gate_results:
            if result.denied_by is None:
                continue
            await self._audit.append_once(
                policy_entry(
                    step.tenant_id,
                    f"{step.run_id}/{result.step}/{result.ord}",
                    "tool.denied_by_policy",
                    tool=result.name,
                    rule=result.denied_by,
                    arguments=await self._readable.arguments(
                        gate_place(step.tenant_id, step.run_id, result), result.arguments
                    ),
                )
            )

    async def _store_gate_results(
        self, tenant_id: str, run_id: str, results: list[GateResult]
    ) -> None:
        for result in results:
            if result.child_run_id is not None:
                await self._store_child_answer(run_id, result, result.child_run_id)
                continue
            cached = result.copy_of is not None
            place = gate_place(tenant_id, run_id, result)
            readable = await self._readable.call(place, result.arguments, result.content or "")
            if result.copy_of is not None:
                await self._readable.copy_output(place, result.copy_of.step, result.copy_of.ord)
            events = tool_events(
                result.event_seq,
                step=result.step,
                call_id=result.call_id,
                name=result.name,
                arguments=readable.arguments,
                output=None if cached else readable.output,
                # An answered question is the gate's answer too, and no error.
                is_error=result.is_error and not cached,
                cached=cached,
            )
            if result.copy_of is not None:
                await self._store.copy_tool_message(
                    run_id=run_id,
                    step=result.step,
                    ord_=result.ord,
                    call_id=result.call_id,
                    name=result.name,
                    source_step=result.copy_of.step,
                    source_ord=result.copy_of.ord,
                    events=events,
                )
            else:
                await self._store.put_tool_message(
                    run_id=run_id,
                    step=result.step,
                    ord_=result.ord,
                    call_id=result.call_id,
                    name=result.name,
                    content=readable.content,
                    is_error=result.is_error,
                    events=events,
                )

    async def _store_child_answer(self, run_id: str, result: GateResult, child: str) -> None:
        """A `task` call's answer: its sub-agent's report, stored as the call's tool message."""
        answer = await self._runs.child_answer(child)
        await self._store.put_tool_message(
            run_id=run_id,
            step=result.step,
            ord_=result.ord,
            call_id=result.call_id,
            name=result.name,
            content=answer.text,
            is_error=answer.is_error,
            events=[
                (
                    result.event_seq,
                    "tool_result",
                    {
                        "step": result.step,
                        "call_id": result.call_id,
                        "name": result.name,
                        "is_error": answer.is_error,
                        "size": len(answer.text.encode()),
                        "preview": answer.text[:PREVIEW_CHARS],
                    },
                ),
                (
                    result.event_seq + 1,
                    "child_run",
                    {
                        "run_id": child,
                        "agent": answer.agent,
                        "status": answer.status,
                        "step": result.step,
                        "call_id": result.call_id,
                    },
                ),
            ],
        )

    async def _complete(
        self,
        step: LlmStepInput,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        permit: CallPermit,
    ) -> tuple[dict[str, Any], Usage, str]:
        claimed = self._plugins.provider_for(step.model) if self._plugins is not None else None
        if claimed is not None:
            return await self._complete_plugin(step, claimed, messages, tools)
        if anthropic_messages.serves(step.model):
            note_provider("anthropic")
            return await self._complete_anthropic(step, messages, tools, permit.saw)
        # The conversation and tools go in `extra_body`: the client's request transform
        # walks every message with type introspection (milliseconds a call, growing with
        # the conversation) and changes nothing in chat payloads. The request on the
        # wire is the same.
        body: dict[str, Any] = {"messages": messages}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = step.tool_choice
        # The stream is read as server-sent events and parsed with `json`: the client's
        # typed chunks cost more CPU than the rest of the step's Python together.
        try:
            async with self._client.chat.completions.with_streaming_response.create(
                model=step.model,
                messages=[],
                stream=True,
                stream_options={"include_usage": True},
                extra_body=body,
            ) as response:
                permit.saw(response.status_code, response.headers)
                deltas = DeltaPublisher(
                    self._store, step.run_id, step.step, activity.info().attempt
                )
                async with deltas:
                    return await collect_stream(
                        stream_chunks(response.iter_lines()), on_text=deltas.add
                    )
        except openai.APIStatusError as exc:
            permit.saw(exc.status_code, exc.response.headers)
            raise openai_errors.status_error(exc) from exc
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise openai_errors.unreachable(self._client.base_url, exc) from exc
        except httpx.HTTPError as exc:  # the stream broke after the reply began
            raise ApplicationError(
                f"LLM stream from {self._client.base_url} broke: {type(exc).__name__}: {exc}",
                type=LLM_UNAVAILABLE,
            ) from exc

    async def _complete_plugin(
        self,
        step: LlmStepInput,
        claimed: ProviderRef,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
    ) -> tuple[dict[str, Any], Usage, str]:
        """A model a provider plugin claims: its adapter, streamed and mapped the same way."""
        note_provider(claimed.provider.name, plugin=claimed.plugin)
        deltas = DeltaPublisher(self._store, step.run_id, step.step, activity.info().attempt)
        async with deltas:
            return await plugin_models.complete(
                claimed,
                model=step.model,
                run_id=step.run_id,
                messages=messages,
                tools=tools,
                tool_choice=step.tool_choice,
                on_text=deltas.add,
            )

    async def _complete_anthropic(
        self,
        step: LlmStepInput,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_answer: Callable[[int, Mapping[str, str]], None],
    ) -> tuple[dict[str, Any], Usage, str]:
        """A `claude-…` (or `anthropic/…`) model: the Messages API, streamed the same way."""
        provider = anthropic_messages.configured(self._anthropic, step.model)
        deltas = DeltaPublisher(self._store, step.run_id, step.step, activity.info().attempt)
        async with deltas:
            return await provider.complete(
                step.model,
                messages,
                tools,
                step.tool_choice,
                on_text=deltas.add,
                on_answer=on_answer,
            )


def _digest(
    tool_calls: list[dict[str, Any]], usage: Usage, latency_ms: int, cost_usd: float
) -> LlmStepResult:
    """What the workflow needs of a model call: the calls to gate, usage, cost and timing.

    The tokens travel as `[prompt, completion]`, a third of the bytes, and arguments
    without the whitespace many models put in their JSON.
    """
    calls = [
        ToolCallRequest(
            call_id=str(call["id"]),
            name=call["function"]["name"],
            arguments=_compact(call["function"]["arguments"]),
        )
        for call in tool_calls
    ]
    tokens = [usage.prompt_tokens, usage.completion_tokens]
    return LlmStepResult(tool_calls=calls, tokens=tokens, latency_ms=latency_ms, cost_usd=cost_usd)


def _compact(arguments: str) -> str:
    """A JSON object's text without insignificant whitespace; anything else as it is.

    The gate parses arguments, so it sees the same values; the model's own text stays
    in the stored message, and arguments that do not parse reach the gate unchanged.
    """
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    if not isinstance(parsed, dict):
        return arguments
    return json.dumps(parsed, ensure_ascii=False, separators=(",", ":"))
