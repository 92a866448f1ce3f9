"""A compaction's summarising call is a model call like any other: its tokens and its
cost count on the run (and so on its tree, every surface and a cost ceiling) once,
however often the compaction activity is retried."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.client import Client

from bench.workspaces import generate_workspace
from keel.activities.llm.prices import ModelPrice
from keel.activities.store.run_store import Store
from keel.worker.config.settings import Settings
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from tests.conftest import in_process_worker
from tests.integration.runs import agent, start_run

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
# Small enough that a few reads of 9 KB files make the conversation compact.
WINDOW = 6_000
PRICE = ModelPrice(input_per_mtok=3.0, output_per_mtok=15.0)


async def test_a_compactions_cost_counts_on_the_run_once(
    temporal_client: Client,
    store: Store,
    scripted: StartLLM,
    settings_for: MakeSettings,
    tmp_path: Path,
) -> None:
    ws = generate_workspace(tmp_path / "ws", total_bytes=90_000)
    reads = [
        Turn(tool_calls=[ScriptedToolCall(name="read_file", arguments={"path": p})])
        for p in ws.files
    ]
    llm = scripted(
        Script(context_window=WINDOW, turns=[*reads, Turn(content="## Summary\nAll read.")])
    )
    settings = settings_for(llm, tmp_path, model_context_window=WINDOW, prices={"scripted": PRICE})
    spec = agent("review", max_steps=100).model_copy(update={"subagents": []})
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, ws.root, spec=spec)
        result = await handle.result()
    assert result.status == "completed", result.error

    async with store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT prompt_tokens, completion_tokens, cost_usd::float AS cost"
            " FROM context_summaries WHERE run_id = %s",
            (result.run_id,),
        )
        summaries = await cur.fetchall()
        cur = await conn.execute(
            "SELECT coalesce(sum(prompt_tokens), 0) AS prompt,"
            " coalesce(sum(completion_tokens), 0) AS completion,"
            " coalesce(sum(cost_usd), 0)::float AS cost FROM llm_calls WHERE run_id = %s",
            (result.run_id,),
        )
        calls = await cur.fetchone()
    assert summaries, "the run must compact on a window this small"
    assert calls is not None
    for row in summaries:
        assert row["cost"] == pytest.approx(
            PRICE.cost(row["prompt_tokens"], row["completion_tokens"])
        )
        assert row["cost"] > 0
    compaction_cost = sum(row["cost"] for row in summaries)

    run = await store.get_run(result.run_id)
    assert run is not None
    # The run's cost is its step calls' and its compactions', each counted once...
    assert run.cost_usd == pytest.approx(calls["cost"] + compaction_cost)
    assert run.prompt_tokens == calls["prompt"] + sum(r["prompt_tokens"] for r in summaries)
    # ...and the workflow, which holds a cost ceiling, counted the same.
    assert result.usage.cost_usd == pytest.approx(run.cost_usd)
