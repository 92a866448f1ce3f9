"""`compact_context`: the model summarises its conversation into a message stored in Postgres.

Later calls send the system prompt, the run's input, the summary and what came
after it. The summary covers every step before the newest (level 0) or all of
them (harder levels, after a provider refused a request as too long); the
summarising request itself is pruned harder until it fits. When the model's summary
fails for good (a provider error on the last attempt, or one no retry can help) or is
unusable (empty, or too long to help), Keel writes one from its records instead
(`activities.context.fallback_summary`), so the run goes on.
"""

from __future__ import annotations

from typing import Any

import openai
from temporalio import activity
from temporalio.exceptions import ApplicationError

from keel.activities.context.budget import ContextBudget, ContextLengthExceeded, context_items
from keel.activities.context.fallback_summary import fallback_summary
from keel.activities.llm.limits import ProviderLimiter
from keel.activities.llm.prices import ModelPrice
from keel.activities.llm.providers import anthropic_messages, one_shot
from keel.activities.plugin_api import PluginCode
from keel.activities.store.context_store import StoredSummary
from keel.activities.store.run_store import Store
from keel.activities.tool_schemas import tool_definitions
from keel.workflows.activity_refs import ContextCompaction
from keel.workflows.context.budget import (
    MAX_LEVEL,
    Summary,
    estimate_message,
    estimate_tools,
    plan_context,
)
from keel.workflows.context.models import CompactionInput, CompactionResult
from keel.workflows.error_types import CONTEXT_TOO_LONG

# Says "summarise the conversation so far": the scripted reviewer keys on that phrase.
COMPACTION_PROMPT = (
    "Summarise the conversation so far for your own later use: the summary replaces "
    "it, so keep everything you need to finish the task. Do not call tools. Write "
    "Markdown with these sections:\n"
    "## Task — what the user asked for.\n"
    "## Files covered — every file you read, one per line as `- path`.\n"
    "## Findings — every finding, one per line as `- path:line: problem`.\n"
    "## Open questions\n"
    "## Files not yet read — one per line as `- path`.\n"
    "## Next steps"
)
# Room kept for the summary the model writes.
SUMMARY_ROOM_SHARE = 0.2


class CompactionActivities(ContextCompaction):
    """Summaries through the adapter that serves the run's model; retries belong to Temporal."""

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        store: Store,
        budget: ContextBudget,
        anthropic: anthropic_messages.AnthropicMessages | None = None,
        plugins: PluginCode | None = None,
        prices: dict[str, ModelPrice] | None = None,
        limits: ProviderLimiter | None = None,
    ) -> None:
        # By module: `one_shot` imports the context budget, and so this package, itself.
        self._model = one_shot.OneShotModel(client, anthropic, plugins, limits)
        self._store = store
        self._budget = budget
        self._prices = prices or {}

    @activity.defn(name="compact_context")
    async def compact_context(self, job: CompactionInput) -> CompactionResult:
        level = job.need.level
        stored = await self._budget.store.summary(job.run_id, job.step, level)
        if stored is not None:  # an earlier attempt finished; answer from its record
            return _result(stored)
        latest = await self._budget.store.budget_inputs(job.run_id, job.model)
        covered_before = latest.summary.through_step if latest.summary else None
        history = await self._store.conversation(
            job.run_id, job.session_id, after_step=covered_before
        )
        items = context_items(history)
        through = job.step - 2 if level == 0 and job.step - 2 >= 1 else job.step - 1
        if through < 1:
            raise ApplicationError(
                f"The run's first request (about {job.need.estimate} tokens) does not fit the "
                f"model's context window of {job.need.window} tokens, and there is nothing "
                "earlier to summarise. Shorten the input or use a model with a larger window.",
                type=CONTEXT_TOO_LONG,
                non_retryable=True,
            )
        covered = [i for i in items if i.step <= through]
        while True:
            inputs = await self._budget.store.budget_inputs(job.run_id, job.model)
            window = self._budget.window(job.model, job.context_window, inputs)
            room = window.usable - int(window.usable * SUMMARY_ROOM_SHARE)
            prompt = {"role": "user", "content": COMPACTION_PROMPT}
            plan = None
            for prune_level in range(level, MAX_LEVEL + 1):
                plan = plan_context(
                    covered,
                    usable=window.usable,
                    tools_tokens=0,
                    summary=inputs.summary,
                    calibration=inputs.calibration,
                    level=prune_level,
                )
                if plan.estimate + estimate_message(prompt) <= room:
                    break
            else:
                raise ApplicationError(
                    f"Even pruned to stubs, the conversation to summarise (about "
                    f"{plan.estimate if plan else 0} tokens) does not fit the model's context "
                    f"window of {window.context_window} tokens; the run cannot go on. Use a "
                    "model with a larger window.",
                    type=CONTEXT_TOO_LONG,
                    non_retryable=True,
                )
            fallback: str | None = None
            try:
                text, usage = await self._summarise(job.model, [*plan.messages, prompt], job.run_id)
                if not text or estimate_message({"content": text}) > window.usable // 2:
                    fallback = "the model's summary was empty or too long to help"
                break
            except ApplicationError as exc:
                if not _gives_up(exc):
                    raise
                text, usage, fallback = "", (0, 0), f"the model's summary failed: {exc}"
                break
            except ContextLengthExceeded as exc:
                refusal = exc
                if refusal.limit is None:  # too long, but by how much is unknown: Keel writes it
                    text, usage, fallback = "", (0, 0), f"the model's summary failed: {exc}"
                    break
                if inputs.learned_window == refusal.limit:
                    raise ApplicationError(
                        f"The provider refused the summarising request as too long for its "
                        f"window of {refusal.limit} tokens: {refusal}",
                        type=CONTEXT_TOO_LONG,
                        non_retryable=True,
                    ) from exc
                await self._budget.store.learn_window(job.model, refusal.limit, job.run_id)
        if fallback is not None:
            activity.logger.warning("run %s: %s; Keel summarises instead", job.run_id, fallback)
            text = fallback_summary(
                covered,
                inputs.summary,
                reason=fallback,
                room_tokens=int(window.usable * SUMMARY_ROOM_SHARE),
            )
        summary = Summary(through_step=through, content=text)
        after = plan_context(
            items,
            usable=window.usable,
            tools_tokens=estimate_tools(tool_definitions(tuple(job.tools))),
            summary=summary,
            calibration=inputs.calibration,
        )
        stored = StoredSummary(
            through_step=through,
            content=text,
            tokens_before=job.need.estimate,
            tokens_after=after.estimate,
            prompt_tokens=usage[0],
            completion_tokens=usage[1],
            cost_usd=self._cost(job.model, usage),
        )
        await self._budget.store.put_summary(
            run_id=job.run_id,
            step=job.step,
            level=level,
            summary=stored,
            event_seq=job.event_seq,
            event={
                "step": job.step,
                "level": level,
                "through_step": through,
                "tokens_before": job.need.estimate,
                "tokens_after": after.estimate,
                "context_window": window.context_window,
                "window_source": window.source,
                "refused": job.need.refused,
                # Why Keel wrote the summary itself; none when the model wrote it.
                "fallback": fallback,
            },
        )
        return _result(stored)

    def _cost(self, model: str, usage: tuple[int, int]) -> float:
        price = self._prices.get(model)
        return price.cost(*usage) if price is not None else 0.0

    async def _summarise(
        self, model: str, messages: list[dict[str, Any]], run_id: str = ""
    ) -> tuple[str, tuple[int, int]]:
        reply = await self._model.complete(
            model, messages, purpose="the summarising request", run_id=run_id, raise_too_long=True
        )
        return reply.text.strip(), reply.tokens


def _gives_up(error: ApplicationError) -> bool:
    """Whether Temporal would not try the summary again: then Keel writes one itself."""
    if error.non_retryable:
        return True
    info = activity.info()
    policy = info.retry_policy
    limit = policy.maximum_attempts if policy is not None else 0
    return limit > 0 and info.attempt >= limit


def _result(stored: StoredSummary) -> CompactionResult:
    return CompactionResult(
        through_step=stored.through_step,
        tokens_before=stored.tokens_before,
        tokens_after=stored.tokens_after,
        tokens=[stored.prompt_tokens, stored.completion_tokens],
        cost_usd=stored.cost_usd,
    )
