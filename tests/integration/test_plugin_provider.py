"""Provider plugins end to end: a real worker, Temporal dev server and Postgres.

The example plugin's `counter` model answers an agent's run with a tool call; a test
plugin's provider fails retryably (waited out for its retry-after) and not (the run
fails at once); a plugin claiming Anthropic's names is refused and the worker starts.
Nothing listens at the OpenAI-compatible endpoint, so no call can go there unseen.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from temporalio.client import Client, WorkflowFailureError

from keel.activities.store.run_store import Store
from keel.worker.agent_catalog import AgentCatalog
from keel.worker.config.settings import Settings
from tests.conftest import in_process_worker
from tests.integration.runs import agent, start_run
from tests.integration.test_llm_errors import llm_step_attempts
from tests.plugin_dists import example_and

MakeSettings = Callable[..., Settings]
NOWHERE = "http://127.0.0.1:9/v1"

# A provider whose models fail as their names say; it notes when each call arrived.
FLAKY = """
import time
from keel.worker.plugins import ModelProviderError, ModelReply, Plugin, PluginProvider

CALLS = []

async def answer(request):
    CALLS.append((request.model, time.monotonic()))
    if request.model == "flaky/rejects":
        raise ModelProviderError("this key may not use flaky/rejects", retryable=False)
    if request.model == "flaky/once" and len(CALLS) == 1:
        raise ModelProviderError("overloaded", retryable=True, retry_after_s=2.5)
    return ModelReply(text="## Summary\\nFine.", input_tokens=11, output_tokens=2)

plugin = Plugin(
    manifest={"name": "flaky", "version": "1.0.0", "kinds": ["provider"]},
    providers=[PluginProvider(name="flaky", models=["flaky/*"], complete=answer)],
)
"""
# Claims Anthropic's names: refused, whatever it would do.
GRABBY = """
from keel.worker.plugins import ModelReply, Plugin, PluginProvider

plugin = Plugin(
    manifest={"name": "grabby", "version": "1.0.0", "kinds": ["provider"]},
    providers=[PluginProvider(name="grabby", models=["claude-*"],
                              complete=lambda request: ModelReply(text="mine"))],
)
"""


@pytest.fixture
def installed(tmp_path: Path) -> Iterator[Path]:
    plugins = {"flaky": ("flaky_provider", FLAKY), "grabby": ("grabby_provider", GRABBY)}
    with example_and(tmp_path, plugins) as site:
        yield site


async def llm_calls(database_url: str, run_id: str) -> list[tuple[str, int, int, float, str]]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT model, prompt_tokens, completion_tokens, cost_usd::float, finish_reason"
            " FROM llm_calls WHERE run_id = %s ORDER BY step",
            (run_id,),
        )
        return list(await cur.fetchall())


async def test_an_agent_runs_on_the_example_provider_with_a_tool_call(
    installed: Path,
    temporal_client: Client,
    store: Store,
    workspace: Path,
    database_url: str,
    settings_for: MakeSettings,
) -> None:
    reports = {r.entry_point: r for r in AgentCatalog.load().plugins.report()}
    assert reports["grabby"].status == "refused"
    assert reports["grabby"].reason.startswith(
        "providers.grabby.models: 'claude-*' overlaps 'claude-*', which the built-in "
        "anthropic adapter claims"
    )
    settings = settings_for(
        NOWHERE,
        workspace,
        model="example/counter",
        prices={"example/counter": {"input_per_mtok": 1_000_000, "output_per_mtok": 2_000_000}},
    )
    notices: list[dict[str, object]] = []

    async def listen(conn: psycopg.AsyncConnection[object]) -> None:
        async for notice in conn.notifies():
            notices.append(json.loads(notice.payload))

    async with (
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn,
        in_process_worker(temporal_client, store, settings),  # starts despite grabby
    ):
        await conn.execute("LISTEN keel_events")
        listening = asyncio.create_task(listen(conn))
        handle = await start_run(
            temporal_client, settings, workspace, spec=agent("notes"), prompt="Count README.md."
        )
        result = await handle.result()
        await asyncio.sleep(0.3)
        listening.cancel()
        await asyncio.gather(listening, return_exceptions=True)

    assert result.status == "completed" and result.stop_reason == "final_answer"
    assert result.tool_calls == 1
    messages = await store.conversation(handle.id, None)
    [asked, answered] = [m for m in messages if m.role == "assistant"]
    assert asked.tool_calls is not None
    assert [
        (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in asked.tool_calls
    ] == [("word_count", {"path": "README.md"})]
    [tool] = [m for m in messages if m.role == "tool"]
    assert tool.content == "README.md: 1 lines, 2 words, 10 characters"  # ran as an activity
    assert answered.content == "Counted: README.md: 1 lines, 2 words, 10 characters"
    # The provider's streamed text went out live, as message_delta notices of its step.
    deltas = [
        n for n in notices if n.get("type") == "message_delta" and n.get("run_id") == handle.id
    ]
    assert deltas and {n["step"] for n in deltas} == {2}
    assert "".join(str(n["delta"]) for n in deltas).strip() == answered.content
    # Usage as the provider counted it, priced and summed like a built-in's.
    calls = await llm_calls(database_url, handle.id)
    assert [(c[0], c[4]) for c in calls] == [
        ("example/counter", "tool_calls"),
        ("example/counter", "stop"),
    ]
    assert calls[0][2] == 2 and calls[1][2] == len(answered.content.split())
    assert result.usage.prompt_tokens == calls[0][1] + calls[1][1] > 0
    assert result.usage.completion_tokens == calls[0][2] + calls[1][2]
    assert [c[3] for c in calls] == [c[1] + 2 * c[2] for c in calls]
    run = await store.get_run(handle.id)
    assert run is not None and run.cost_usd == pytest.approx(sum(c[3] for c in calls))


async def test_a_provider_s_retryable_error_waits_for_its_retry_after_and_a_refusal_fails_at_once(
    installed: Path,
    temporal_client: Client,
    store: Store,
    workspace: Path,
    settings_for: MakeSettings,
) -> None:
    import flaky_provider

    settings = settings_for(NOWHERE, workspace, model="flaky/once", llm_max_attempts=3)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace)
        result = await handle.result()
        assert result.status == "completed"
        assert result.usage.prompt_tokens == 11
        assert await llm_step_attempts(handle) == [2]
        [(_, first), (_, second)] = flaky_provider.CALLS
        assert second - first >= 2.3  # the provider's retry-after, not the 1 s backoff

        flaky_provider.CALLS.clear()
        refused = await start_run(
            temporal_client,
            settings.model_copy(update={"model": "flaky/rejects"}),
            workspace,
        )
        with pytest.raises(WorkflowFailureError):
            await refused.result()
    assert [model for model, _ in flaky_provider.CALLS] == ["flaky/rejects"]  # no retry
    run = await store.get_run(refused.id)
    assert run is not None and run.status == "failed" and run.error is not None
    assert (
        "The model provider flaky/flaky rejected the request: this key may not use flaky/rejects"
        in run.error
    )
