"""Prometheus metrics: the worker's (Temporal's and Keel's) and the API's, scraped and parsed."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.workspaces import generate_workspace
from keel.activities.llm.limits import ProviderLimit
from keel.activities.store.run_store import Store
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import TemporalDevServer, free_port
from keel.worker.observability.metrics import worker_runtime
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.worker.temporal_client import connect
from tests.conftest import in_process_worker
from tests.integration.keel_http import keel_api
from tests.integration.runs import agent, start_run
from tests.integration.test_approvals import ALICE, decide, finished, pending, start, write

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(url: str) -> tuple[Samples, set[str]]:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(url)
    assert response.status_code == 200
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples, {name for name, _ in samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum over the samples of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def delta(after: Samples, before: Samples, name: str, **labels: str) -> float:
    """How much `name` (summed as `value` sums it) moved between two scrapes."""
    return value(after, name, **labels) - value(before, name, **labels)


async def test_a_run_moves_the_counters_by_what_it_did(
    temporal_server: TemporalDevServer,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(name="read_file", arguments={"path": "pkg/core.py"}),
                        ScriptedToolCall(name="read_file", arguments={"path": "missing.py"}),
                        write("notes.txt", "reviewed"),
                    ],
                    prompt_tokens=300,
                    completion_tokens=30,
                ),
                Turn(content="Done.", prompt_tokens=500, completion_tokens=70),
            ]
        )
    )
    settings = settings_for(
        llm,
        workspace,
        api_port=free_port(),
        api_metrics_port=free_port(),
        worker_metrics_port=free_port(),
        prices={"scripted": {"input_per_mtok": 2.0, "output_per_mtok": 10.0}},
    )
    runtime = worker_runtime(settings)
    assert runtime is not None
    client = await connect(temporal_server.address, runtime=runtime)
    worker_url = f"http://127.0.0.1:{settings.worker_metrics_port}/metrics"
    api_url = f"http://127.0.0.1:{settings.api_metrics_port}/metrics"
    queue = {"task_queue": settings.task_queue}
    # Shared set-up, with a Temporal client of this test's: its runtime exports the metrics.
    async with keel_api(client, store, settings, headers={}) as http:
        # The database and the API's registry are shared with earlier tests: compare
        # against what they showed before this run.
        before, _ = await scrape(api_url)
        run_id = await start(http, workspace)
        [ia] = await pending(http, run_id)
        api, _ = await scrape(api_url)
        assert delta(api, before, "keel_pending_interactions", tenant="default") == 1
        assert (await decide(http, run_id, ia)).status_code == 200
        assert (await finished(http, run_id))["status"] == "completed"
        assert (await http.get("/v1/runs/no-such-run", headers=ALICE)).status_code == 404

        worker, names = await scrape(worker_url)
        api, _ = await scrape(api_url)

    started = value(worker, "keel_runs_started_total", agent="build", tenant="default", **queue)
    assert started == 1
    assert value(worker, "keel_runs_finished_total", agent="build", status="completed") == 1
    assert value(worker, "keel_model_calls_total", model="scripted", outcome="ok", **queue) == 2
    assert value(worker, "keel_model_tokens_total", model="scripted", kind="input") == 800
    assert value(worker, "keel_model_tokens_total", model="scripted", kind="output") == 100
    cost = value(worker, "keel_model_cost_usd_sum", model="scripted", **queue)
    assert abs(cost - (800 * 2.0 + 100 * 10.0) / 1e6) < 1e-9
    assert value(worker, "keel_model_latency_ms_count", model="scripted", **queue) == 2
    assert value(worker, "keel_tool_calls_total", tool="read_file", outcome="ok", **queue) == 1
    assert value(worker, "keel_tool_calls_total", tool="read_file", outcome="error") == 1
    assert value(worker, "keel_tool_calls_total", tool="write_file", outcome="ok") == 1
    assert value(worker, "keel_approval_wait_ms_count", tool="write_file", status="approved") == 1
    # Temporal's own worker metrics are served on the same endpoint.
    assert any(n.startswith("temporal_workflow_task_execution_latency") for n in names), names
    # (Whether the model calls ran as regular or local activities depends on how fast
    # the model was in earlier tests, so only metrics every run moves are checked.)
    assert value(worker, "temporal_workflow_completed_total", **queue) >= 1
    assert any(n == "temporal_worker_task_slots_available" for n in names)

    assert delta(api, before, "keel_api_requests_total", method="POST", route="/v1/runs") == 1
    assert (
        delta(api, before, "keel_api_requests_total", route="/v1/runs/{run_id}", status="404") == 1
    )
    assert (
        delta(api, before, "keel_api_request_seconds_count", method="POST", route="/v1/runs") == 1
    )
    assert delta(api, before, "keel_pending_interactions", tenant="default") == 0


async def test_compactions_are_counted_by_model_and_reason(
    temporal_server: TemporalDevServer,
    store: Store,
    scripted: StartLLM,
    settings_for: MakeSettings,
    tmp_path: Path,
) -> None:
    # A model whose 5,000-token window Keel does not know: the first over-long request
    # is refused by the provider, later ones are compacted at the threshold.
    ws = generate_workspace(tmp_path / "ws", total_bytes=150_000)
    model = f"small-window-{uuid.uuid4().hex[:8]}"
    llm = scripted(Script(name=model, policy="reviewer", context_window=5_000))
    settings = settings_for(llm, tmp_path, model=model, worker_metrics_port=free_port())
    runtime = worker_runtime(settings)
    assert runtime is not None
    client = await connect(temporal_server.address, runtime=runtime)
    # Without its `task` tool, so the one conversation is what must be compacted.
    spec = agent("review", max_steps=200, max_tool_calls=200).model_copy(update={"subagents": []})
    async with in_process_worker(client, store, settings):
        result = await (await start_run(client, settings, ws.root, spec=spec)).result()
        samples, _ = await scrape(f"http://127.0.0.1:{settings.worker_metrics_port}/metrics")
    assert result.status == "completed", result.error
    events = await store.list_events(result.run_id, limit=5000)
    made = [e.data for e in events if e.type == "compaction"]
    refused = sum(1 for c in made if c["refused"])
    assert refused >= 1 and len(made) > refused, made
    total = value(samples, "keel_compactions_total", model=model)
    assert total == len(made)
    assert value(samples, "keel_compactions_total", model=model, reason="refused") == refused


async def test_waits_for_a_providers_rate_limit_are_counted(
    temporal_server: TemporalDevServer,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(Script(turns=[Turn(content="Done.")]))
    limit = ProviderLimit(base_url=llm.base_url, requests=2, window_s=1)
    settings = settings_for(
        llm, workspace, worker_metrics_port=free_port(), provider_limits=[limit]
    )
    runtime = worker_runtime(settings)
    assert runtime is not None
    client = await connect(temporal_server.address, runtime=runtime)
    spec = agent("investigate")
    async with in_process_worker(client, store, settings):
        handles = [await start_run(client, settings, workspace, spec=spec) for _ in range(3)]
        results = [await h.result() for h in handles]
        samples, _ = await scrape(f"http://127.0.0.1:{settings.worker_metrics_port}/metrics")
    assert [r.status for r in results] == ["completed"] * 3
    # Three calls at two a second: the later two wait their turn, and say why.
    endpoint = {"endpoint": limit.base_url, "reason": "requests"}
    assert value(samples, "keel_rate_limit_waits_total", **endpoint) >= 2
    assert value(samples, "keel_rate_limit_wait_ms_count", **endpoint) >= 2
    assert value(samples, "keel_rate_limit_wait_ms_sum", **endpoint) > 500
