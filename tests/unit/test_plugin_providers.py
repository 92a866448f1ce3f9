"""Provider plugins: model names claimed once, and a plugin's answers and errors mapped.

Discovery goes through real distributions on `sys.path` (`tests.plugin_dists`); the
adapter is called as the LLM activity calls it, with the plugin's real functions.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from keel.activities.context.budget import ContextLengthExceeded
from keel.activities.llm.provider_api import ProviderRef
from keel.activities.llm.providers.claims import claim_problem, overlap
from keel.activities.llm.providers.plugin_models import complete
from keel.worker.plugins import (
    ModelContextTooLong,
    ModelProviderError,
    ModelReply,
    ModelRequest,
    ModelToolCall,
    PluginProvider,
    PluginRegistry,
)
from tests.plugin_dists import EXAMPLE_PLUGIN, install_module, install_project, on_path

PROVIDER_PLUGIN = """
from keel.worker.plugins import ModelReply, Plugin, PluginProvider

plugin = Plugin(
    manifest={{"name": {name!r}, "version": "1.0.0", "kinds": {kinds!r}}},
    providers=[PluginProvider(name={provider!r}, models={models!r},
                              complete=lambda request: ModelReply(text="hi"))],
)
"""


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    modules: list[str] = []
    (tmp_path / "site").mkdir()
    with on_path(tmp_path / "site", modules):
        yield tmp_path / "site", modules


def provider_plugin(
    target: Path,
    module: str,
    models: list[str],
    *,
    provider: str | None = None,
    kinds: tuple[str, ...] = ("provider",),
) -> list[str]:
    source = PROVIDER_PLUGIN.format(
        name=module, provider=provider or module, models=models, kinds=list(kinds)
    )
    return install_module(target, module, module, source, {module: f"{module}:plugin"})


def test_the_example_provider_loads_and_is_chosen_by_its_model_names(
    site: tuple[Path, list[str]],
) -> None:
    target, modules = site
    modules += install_project(EXAMPLE_PLUGIN, target)
    registry = PluginRegistry.installed()
    [example] = [r for r in registry.report() if r.name == "example"]
    assert example.status == "loaded" and "provider" in example.kinds
    assert example.providers == ("counter (example/*)",)
    chosen = registry.provider_for("example/counter")
    assert chosen is not None and chosen.label == "example/counter"
    assert registry.provider_for("gpt-4.1-mini") is None
    assert registry.provider_for("claude-sonnet-4-5") is None
    assert registry.provider_for("example") is None  # the prefix is `example/`


def test_a_provider_cannot_claim_a_built_in_s_or_another_plugin_s_model_names(
    site: tuple[Path, list[str]],
) -> None:
    target, modules = site
    modules += install_project(EXAMPLE_PLUGIN, target)
    modules += provider_plugin(target, "takes_claude", ["claude-3*"])
    modules += provider_plugin(target, "takes_gpt", ["gpt-5"])
    modules += provider_plugin(target, "takes_example", ["example/counter-2"])
    modules += provider_plugin(target, "wide", ["ex*"])
    modules += provider_plugin(target, "everything", ["*"])
    modules += provider_plugin(target, "twice", ["tw/*", "tw/a"])
    modules += provider_plugin(target, "renamed", ["own/*"], provider="anthropic")
    modules += provider_plugin(target, "undeclared", ["mine/*"], kinds=("tool",))
    modules += provider_plugin(target, "zfine", ["zfine/*"])
    registry = PluginRegistry.installed()
    reports = {r.entry_point: r for r in registry.report()}
    refused = {k: r.reason for k, r in reports.items() if r.status == "refused"}
    assert refused["takes_claude"].startswith(
        "providers.takes_claude.models: 'claude-3*' overlaps 'claude-*', which the built-in "
        "anthropic adapter claims"
    )
    assert refused["takes_gpt"].startswith(
        "providers.takes_gpt.models: 'gpt-5' overlaps 'gpt-*', which the built-in openai"
    )
    assert refused["takes_example"].startswith(
        "providers.takes_example.models: 'example/counter-2' overlaps 'example/*', which the "
        "provider example/counter (keel-example-plugin 0.1.0) claims"
    )
    assert "'ex*' overlaps 'example/*'" in refused["wide"]
    assert refused["everything"].startswith(
        "providers.everything.models: '*' is not a model name or a prefix ending in '*'"
    )
    assert refused["twice"] == (
        "providers.twice.models: 'tw/*' and 'tw/a' overlap; claim each model name once"
    )
    assert refused["renamed"].startswith("providers: 'anthropic' is already the name of")
    assert refused["undeclared"] == "manifest.kinds: lists 'tool' but the plugin provides none"
    # The rest load, and the refused claim nothing.
    assert reports["zfine"].status == "loaded"
    assert registry.provider_for("zfine/model") is not None
    assert registry.provider_for("claude-3-opus") is None
    assert registry.provider_for("example/counter-2") is not None  # still the example's
    assert registry.provider_for("example/counter-2").plugin == "example"  # type: ignore[union-attr]


def test_claims_overlap_when_one_model_name_matches_both() -> None:
    assert overlap("acme/*", "acme/big") and overlap("acme/big", "acme/*")
    assert overlap("ac*", "acme/*") and overlap("acme/*", "ac*")
    assert not overlap("acme/*", "acme") and not overlap("acme-1", "acme-2")
    assert overlap("acme-1", "acme-1")
    assert claim_problem("acme/*") is None and claim_problem("m") is None
    assert claim_problem("a*") is not None and claim_problem("a*b") is not None
    assert claim_problem("has space") is not None and claim_problem(3) is not None


def provider(complete_fn: object) -> ProviderRef:
    return ProviderRef("acme", PluginProvider(name="acme", models=["acme/*"], complete=complete_fn))  # type: ignore[arg-type]


def call(ref: ProviderRef, tool_choice: str = "auto") -> tuple[dict[str, object], object, str]:
    streamed: list[str] = []

    async def go() -> tuple[dict[str, object], object, str]:
        return await complete(
            ref,
            model="acme/one",
            run_id="run-1",
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hi"},
            ],
            tools=[{"type": "function", "function": {"name": "read_file", "parameters": {}}}],
            tool_choice=tool_choice,
            on_text=streamed.append,
        )

    message, usage, finish = asyncio.run(go())
    message["streamed"] = streamed
    return message, usage, finish


def test_a_reply_becomes_the_stored_message_with_usage_estimated_when_not_counted() -> None:
    def answer(request: ModelRequest) -> ModelReply:
        assert request.model == "acme/one" and request.tool_choice == "auto"
        request.stream("thin")  # from a thread: handed to the loop
        request.stream("king")
        return ModelReply(
            text="thinking",
            tool_calls=[
                ModelToolCall(name="read_file", arguments={"path": "a.md"}),
                ModelToolCall(name="read_file", arguments='{"path":"b.md"}', id="mine"),
            ],
        )

    message, usage, finish = call(provider(answer))
    assert message["content"] == "thinking" and finish == "tool_calls"
    assert message["tool_calls"] == [
        {
            "id": "call_0",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": "a.md"})},
        },
        {
            "id": "mine",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path":"b.md"}'},
        },
    ]
    assert message["streamed"] == ["thin", "king"]
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0  # type: ignore[attr-defined]

    async def counted(request: ModelRequest) -> ModelReply:
        return ModelReply(
            text="done",
            tool_calls=[ModelToolCall(name="x", arguments={})],
            input_tokens=7,
            output_tokens=3,
        )

    message, usage, finish = call(provider(counted), tool_choice="none")
    assert message["tool_calls"] == [] and finish == "stop"  # `none`: no calls kept
    assert (usage.prompt_tokens, usage.completion_tokens) == (7, 3)  # type: ignore[attr-defined]


def test_errors_say_whether_temporal_retries_as_for_the_built_in_adapters() -> None:
    def rate_limited(request: ModelRequest) -> ModelReply:
        raise ModelProviderError("slow down", retryable=True, retry_after_s=2.5)

    def refused(request: ModelRequest) -> ModelReply:
        raise ModelProviderError("no such model", retryable=False)

    def broken(request: ModelRequest) -> ModelReply:
        raise ConnectionError("socket closed")

    def too_long(request: ModelRequest) -> ModelReply:
        raise ModelContextTooLong("too long", limit=1000, size=1500)

    def odd(request: ModelRequest) -> str:
        return "not a reply"

    with pytest.raises(ApplicationError) as retried:
        call(provider(rate_limited))
    assert retried.value.type == "LlmUnavailable" and not retried.value.non_retryable
    assert retried.value.next_retry_delay == timedelta(seconds=2.5)
    assert retried.value.message == "The model provider acme/acme failed: slow down"
    with pytest.raises(ApplicationError) as rejected:
        call(provider(refused))
    assert rejected.value.type == "LlmRequestRejected" and rejected.value.non_retryable
    assert "rejected the request: no such model" in str(rejected.value)
    with pytest.raises(ApplicationError) as failed:
        call(provider(broken))
    assert failed.value.type == "LlmUnavailable" and not failed.value.non_retryable
    assert "ConnectionError: socket closed" in str(failed.value)
    with pytest.raises(ContextLengthExceeded) as long:
        call(provider(too_long))
    assert (long.value.limit, long.value.size) == (1000, 1500)
    with pytest.raises(ApplicationError) as wrong:
        call(provider(odd))
    assert wrong.value.non_retryable and "answered a str, not a ModelReply" in str(wrong.value)


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (
            ModelReply(tool_calls=[ModelToolCall(name="x", arguments={"when": object()})]),
            "TypeError: Object of type object is not JSON serializable",
        ),
        (ModelReply(text="hi", input_tokens="many"), "ValueError: invalid literal for int()"),  # type: ignore[arg-type]
        (ModelReply(text="hi", output_tokens=float("inf")), "OverflowError"),  # type: ignore[arg-type]
        (
            ModelReply(tool_calls=[{"name": "x", "arguments": {}}]),  # type: ignore[list-item]
            "TypeError: tool_calls[0] is a dict, not a ModelToolCall",
        ),
    ],
    ids=["unserialisable-arguments", "token-count-text", "token-count-inf", "call-not-a-call"],
)
def test_a_malformed_reply_fails_once_naming_the_plugin(reply: ModelReply, said: str) -> None:
    with pytest.raises(ApplicationError) as malformed:
        call(provider(lambda request: reply))
    assert malformed.value.type == "LlmRequestRejected" and malformed.value.non_retryable
    message = malformed.value.message
    assert message.startswith("The model provider acme/acme answered a malformed ModelReply: ")
    assert said in message and message.endswith("; fix the plugin.")


def test_a_compaction_summary_of_a_plugin_s_model_is_written_by_that_provider(
    site: tuple[Path, list[str]],
) -> None:
    from keel.activities.context.compaction import CompactionActivities

    target, modules = site
    modules += provider_plugin(target, "summer", ["summer/*"])
    registry = PluginRegistry.installed()
    # No OpenAI client, store or budget: the summary must come from the plugin alone.
    compaction = CompactionActivities(None, None, None, plugins=registry)  # type: ignore[arg-type]
    messages = [{"role": "user", "content": "Summarise the conversation so far."}]
    text, (prompt, completion) = asyncio.run(compaction._summarise("summer/1", messages, "run-1"))
    assert text == "hi" and prompt > 0 and completion > 0
