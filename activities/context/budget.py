"""Plans each model request against the model's window (see `keel.workflows.context.budget`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import openai
from temporalio.exceptions import ApplicationError

from keel.activities.store.context_store import BudgetInputs, ContextStore
from keel.activities.store.records import MessageRecord
from keel.workflows.context.budget import (
    COMPACT_AT,
    MAX_LEVEL,
    MESSAGE_OVERHEAD_TOKENS,
    RECENT_SHARE,
    STALE_AT,
    ContextItem,
    ContextPlan,
    calibrated,
    estimate_text,
    estimate_tools,
    plan_context,
)
from keel.workflows.context.model_windows import ModelWindow, window_for
from keel.workflows.error_types import CONTEXT_TOO_LONG

# How providers say a request is too long, and where they name the limit.
_LIMITS = (
    re.compile(r"maximum context length is (\d+)"),  # OpenAI, vLLM, llama.cpp's OpenAI API
    re.compile(r"\d+ tokens > (\d+) maximum"),  # Anthropic
    re.compile(r"context window of (\d+)"),
)
_SIZES = (
    re.compile(r"resulted in (\d+) tokens"),
    re.compile(r"requested (\d+) tokens"),
    re.compile(r"(\d+) tokens > \d+ maximum"),
)


class ContextLengthExceeded(Exception):
    """The provider refused a request as longer than the model's window."""

    def __init__(self, message: str, limit: int | None, size: int | None) -> None:
        super().__init__(message)
        self.limit = limit
        self.size = size


def exceeded_limit(exc: openai.APIStatusError) -> ContextLengthExceeded | None:
    """The refusal in a provider's error, if it says the request was too long."""
    if exc.status_code not in (400, 413):
        return None
    body = exc.body
    error = body.get("error", body) if isinstance(body, dict) else {}
    code = error.get("code") if isinstance(error, dict) else None
    message = str(error.get("message") if isinstance(error, dict) else exc.message)
    too_long = code == "context_length_exceeded" or any(p.search(message) for p in _LIMITS)
    if not too_long and "prompt is too long" not in message:
        return None
    limit = next((int(m[1]) for p in _LIMITS if (m := p.search(message))), None)
    size = next((int(m[1]) for p in _SIZES if (m := p.search(message))), None)
    return ContextLengthExceeded(message, limit, size)


def context_items(history: list[MessageRecord]) -> list[ContextItem]:
    """The stored messages as budgeting sees them, tool results named by their calls."""
    calls: dict[str, tuple[str, str]] = {}
    items: list[ContextItem] = []
    for record in history:
        message = openai_message(record)
        if record.role == "assistant":
            for call in record.tool_calls or []:
                function = call.get("function")
                if isinstance(function, dict):
                    calls[str(call.get("id"))] = (
                        str(function.get("name")),
                        str(function.get("arguments") or ""),
                    )
        if record.role == "tool":
            name, arguments = calls.get(str(record.tool_call_id), (record.name or "tool", ""))
            items.append(ContextItem(record.step, message, tool=name, arguments=arguments))
        else:
            items.append(ContextItem(record.step, message))
    return items


@dataclass
class BudgetedRequest:
    """A planned request: what to send, against which window, from which store state."""

    plan: ContextPlan
    window: ModelWindow
    inputs: BudgetInputs


class ContextBudget:
    """Windows (configured, learnt, known) and the plan of each request."""

    def __init__(
        self,
        store: ContextStore,
        *,
        default_model: str,
        default_window: int | None,
        enabled: bool = True,
    ) -> None:
        self.store = store
        self.enabled = enabled
        self._default_model = default_model
        self._default_window = default_window

    def window(self, model: str, agent_window: int | None, inputs: BudgetInputs) -> ModelWindow:
        return window_for(
            model,
            agent=agent_window,
            settings=self._default_window if model == self._default_model else None,
            learned=inputs.learned_window,
        )

    async def plan(
        self,
        *,
        inputs: BudgetInputs,
        model: str,
        agent_window: int | None,
        history: list[MessageRecord],
        tools: list[dict[str, Any]],
    ) -> BudgetedRequest:
        window = self.window(model, agent_window, inputs)
        tools_tokens = estimate_tools(tools)
        plan = None
        if inputs.summary is None:
            plan = untouched_plan(
                history,
                usable=window.usable,
                tools_tokens=tools_tokens,
                calibration=inputs.calibration,
            )
        if plan is None:
            plan = plan_context(
                context_items(history),
                usable=window.usable,
                tools_tokens=tools_tokens,
                summary=inputs.summary,
                calibration=inputs.calibration,
            )
        return BudgetedRequest(plan=plan, window=window, inputs=inputs)

    @staticmethod
    def next_level(
        inputs: BudgetInputs, step: int, *, refused: bool, estimate: int, window: ModelWindow
    ) -> int:
        """How hard to compact now; fails the run once the hardest did not help."""
        if inputs.summary_step == step:
            level = inputs.summary_level + 1
        else:
            level = 1 if refused else 0
        if level > MAX_LEVEL:
            raise ApplicationError(
                f"The conversation cannot fit the model's context window of "
                f"{window.context_window} tokens (source: {window.source}) even after the "
                f"hardest compaction: the system prompt, the run's input, the summary and "
                f"the tool schemas alone take about {estimate} tokens. Use a model with a "
                "larger window, or shorten the agent's prompt or the input.",
                type=CONTEXT_TOO_LONG,
                non_retryable=True,
            )
        return level


def untouched_plan(
    history: list[MessageRecord], *, usable: int, tools_tokens: int, calibration: float
) -> ContextPlan | None:
    """The plan `plan_context` makes for a conversation far from the window's edge, or None.

    Far from the edge (and with no summary), caps and pruning change nothing and no
    compaction is due: all tool outputs together fit the recent share, which is smaller
    than one output's cap, and the calibrated estimate and what a summary would drop
    stay under their thresholds. Then the plan is the messages as they are, found with
    one pass of lengths instead of a copy of every message, a cap check of every output
    and a pruning walk. The same figures as `plan_context`'s (tests hold them equal).
    """
    raw = tools_tokens
    outputs = 0
    stale = 0
    messages: list[dict[str, Any]] = []
    for record in history:
        tokens = estimate_text(record.content or "")
        raw += MESSAGE_OVERHEAD_TOKENS + tokens
        if record.role == "tool":
            outputs += tokens
        elif record.role == "assistant" and record.tool_calls:
            calls = estimate_text(json.dumps(record.tool_calls, separators=(",", ":")))
            raw += calls
            if record.step > 0:
                stale += MESSAGE_OVERHEAD_TOKENS + calls
        messages.append(openai_message(record))
    if outputs > int(usable * RECENT_SHARE):
        return None
    estimate = calibrated(raw, calibration)
    if estimate > usable * COMPACT_AT or stale > usable * STALE_AT:
        return None
    return ContextPlan(messages=messages, estimate=estimate, raw=raw, stale=stale)


def openai_message(message: MessageRecord) -> dict[str, Any]:
    """A stored message as a chat request carries it."""
    out: dict[str, Any] = {"role": message.role, "content": message.content or ""}
    if message.role == "assistant" and message.tool_calls:
        out["tool_calls"] = message.tool_calls
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
    return out
