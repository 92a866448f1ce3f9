"""Provider rate limits shared by workers, and fallback models, against the scripted
provider over HTTP: it answers 429 past its limit, 529 or 404 for a model on demand."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client
from temporalio.worker import Replayer

from keel.activities.llm.limits import ProviderLimit
from keel.activities.llm.prices import ModelPrice
from keel.activities.store.run_store import Store
from keel.worker.dev_stack import TemporalDevServer
from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from keel.worker.scripted.provider_play import RateLimit
from keel.worker.temporal_client import DATA_CONVERTER
from keel.workflows.run.agent_run import AgentRunWorkflow
from tests.conftest import in_process_worker
from tests.integration.keel_http import LaunchKeel, StartLLM, finished, settings_of
from tests.integration.test_router import routed

HISTORIES = Path(__file__).parent.parent / "histories"
SECOND_WORKER = "second-worker"
LIMIT = 6
WINDOW_S = 2.0
RUNS = 8
ROUTED_LIMIT = 3
ROUTED_RUNS = 6
# A model whose steps the fallback takes costs ten times more, so a mispriced call shows.
PRIMARY = ModelPrice(input_per_mtok=100.0, output_per_mtok=300.0)
BACKUP = ModelPrice(input_per_mtok=10.0, output_per_mtok=30.0)

CALLS_SQL = (
    "SELECT model, fallback_from, fallback_reason, cost_usd::float AS cost_usd,"
    " prompt_tokens, completion_tokens FROM llm_calls WHERE run_id = %s ORDER BY step"
)


async def events(http: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    response = await http.get(f"/v1/runs/{run_id}/events")
    assert response.status_code == 200, response.text
    body = response.json()
    return list(body["events"] if isinstance(body, dict) else body)


async def worker_identities(client: Client, run_id: str) -> set[str]:
    """The workers that ran the run's workflow tasks and regular activities."""
    history = await client.get_workflow_handle(run_id).fetch_history()
    found = set()
    for event in history.events:
        if event.HasField("workflow_task_started_event_attributes"):
            found.add(event.workflow_task_started_event_attributes.identity)
        if event.HasField("activity_task_started_event_attributes"):
            found.add(event.activity_task_started_event_attributes.identity)
    return found


async def calls(store: Store, run_id: str) -> list[dict[str, Any]]:
    async with store.pool.connection() as conn:
        cur = await conn.execute(CALLS_SQL, (run_id,))
        return list(await cur.fetchall())


async def start(http: httpx.AsyncClient, workspace: Path, **body: object) -> str:
    made = await http.post(
        "/v1/runs",
        json={"agent": "investigate", "input": "What is here?", "workspace": str(workspace)} | body,
    )
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


async def test_two_workers_share_a_providers_limit_and_no_run_fails(
    keel_app: LaunchKeel,
    scripted: StartLLM,
    temporal_server: TemporalDevServer,
    store: Store,
    workspace: Path,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[ScriptedToolCall(name="list_files", arguments={})]),
                Turn(content="## Answer\nA small project."),
            ],
            rate_limit=RateLimit(requests=LIMIT, window_s=WINDOW_S),
        )
    )
    limit = ProviderLimit(base_url=llm.base_url, requests=LIMIT, window_s=WINDOW_S)
    async with keel_app(llm, llm_max_attempts=6, provider_limits=[limit]) as http:
        # A second worker on the same queue, with a client and a limiter of its own: the
        # two share only what Postgres holds.
        second = await Client.connect(
            temporal_server.address, data_converter=DATA_CONVERTER, identity=SECOND_WORKER
        )
        async with in_process_worker(second, store, settings_of(http)):
            ids = [await start(http, workspace) for _ in range(RUNS)]
            runs = await asyncio.gather(*(finished(http, i) for i in ids))
            waits = [e for i in ids for e in await events(http, i) if e["type"] == "rate_limited"]
            workers = {w for i in ids for w in await worker_identities(second, i)}
    assert [r["status"] for r in runs] == ["completed"] * RUNS, [r.get("error") for r in runs]
    # Both workers took part in the runs' workflow tasks and model calls.
    assert SECOND_WORKER in workers and len(workers) == 2, workers
    play = llm.play
    # 16 calls, at most 6 in any 2 s: the provider saw no more than its limit, plus the
    # requests it refused (each refusal's retry-after then held every worker back).
    assert play.max_received_in_window() <= LIMIT + play.rate_limited
    assert play.rate_limited <= 2, play.rate_limited
    assert len(play.received_at) == 2 * RUNS + play.rate_limited
    # The waits are durable events: how long, and why.
    assert waits, "no run waited for the limit"
    assert all(w["data"]["wait_s"] > 0 for w in waits)
    assert {w["data"]["reason"] for w in waits} <= {"requests", "provider"}
    # 16 calls at 6 per 2 s take at least (16 - 6) / 3 s.
    spread = max(play.received_at) - min(play.received_at)
    assert spread >= (2 * RUNS - LIMIT) * WINDOW_S / LIMIT * 0.9, spread


async def test_a_primary_that_answers_529_has_its_step_taken_by_the_fallback(
    keel_app: LaunchKeel,
    scripted: StartLLM,
    store: Store,
    workspace: Path,
    temporal_client: Client,
) -> None:
    llm = scripted(
        Script(turns=[Turn(content="## Answer\nDone.")], model_failures={"primary": 529})
    )
    prices = {"primary": PRIMARY, "backup": BACKUP}
    async with keel_app(llm, prices=prices) as http:
        run_id = await start(http, workspace, model=["primary", "backup"])
        run = await finished(http, run_id)
        seen = await events(http, run_id)
    assert run["status"] == "completed", run.get("error")
    play = llm.play
    assert play.requests_by_model["primary"] == 3  # its three attempts, then the fallback
    assert play.requests_by_model["backup"] == 1
    [call] = await calls(store, run_id)
    assert call["model"] == "backup" and call["fallback_from"] == "primary"
    assert call["fallback_reason"].startswith("overloaded: LLM provider answered 529")
    # Priced by the model that answered.
    expected = BACKUP.cost(call["prompt_tokens"], call["completion_tokens"])
    assert abs(call["cost_usd"] - expected) < 1e-6 and expected > 0
    assert abs(run["total_usage"]["cost_usd"] - expected) < 1e-6
    [moved] = [e for e in seen if e["type"] == "model_fallback"]
    assert moved["data"] | {"detail": ""} == {
        "step": 1,
        "from_model": "primary",
        "to_model": "backup",
        "reason": "overloaded",
        "detail": "",
    }
    message = next(e for e in seen if e["type"] == "message")
    assert moved["seq"] < message["seq"]
    history = await temporal_client.get_workflow_handle(run_id).fetch_history()
    replayer = Replayer(workflows=[AgentRunWorkflow], data_converter=DATA_CONVERTER)
    assert (await replayer.replay_workflow(history)).replay_failure is None
    if os.environ.get("KEEL_RECORD_HISTORY"):
        (HISTORIES / "agent_run_model_fallback.json").write_text(
            json.dumps(history.to_json_dict(), indent=1)
        )


async def test_an_unknown_model_moves_on_at_once_and_the_last_models_failure_stands(
    keel_app: LaunchKeel, scripted: StartLLM, store: Store, workspace: Path
) -> None:
    llm = scripted(
        Script(turns=[Turn(content="## Answer\nDone.")], model_failures={"ghost": 404, "down": 503})
    )
    async with keel_app(llm) as http:
        moved_id = await start(http, workspace, model=["ghost", "scripted"])
        failed_id = await start(http, workspace, model=["ghost", "down"])
        moved, failed = await finished(http, moved_id), await finished(http, failed_id)
    assert moved["status"] == "completed", moved.get("error")
    [call] = await calls(store, moved_id)
    assert call["model"] == "scripted" and call["fallback_reason"].startswith("unknown_model")
    # The last model has nothing after it: its failure ends the run, with its attempts.
    assert failed["status"] == "failed"
    assert "503" in (failed.get("error") or ""), failed.get("error")
    play = llm.play
    assert play.requests_by_model["ghost"] == 2  # once a run: a 404 is not retried
    assert play.requests_by_model["down"] == 3


async def test_a_model_list_is_checked_where_it_is_given(
    keel_app: LaunchKeel, workspace: Path
) -> None:
    async with keel_app(Script(turns=[Turn(content="x")])) as http:
        for model, sentence in [
            ([], "is an empty list; name at least one model"),
            (["a", "a"], "lists a twice; name each model once"),
            (["scripted", "claude-sonnet-4-5"], "claude-sonnet-4-5 is Anthropic's, and this Keel"),
        ]:
            body = {"agent": "investigate", "input": "x", "workspace": str(workspace)}
            refused = await http.post("/v1/runs", json=body | {"model": model})
            assert refused.status_code == 422, refused.text
            assert sentence in refused.text, refused.text


async def test_the_routers_calls_wait_their_turn_under_the_providers_limit(
    keel_app: LaunchKeel, scripted: StartLLM, workspace: Path
) -> None:
    """The router's classification is a model call like a step: under the provider's
    limit it waits its turn, so routed runs started at once meet no 429 for it."""
    llm = scripted(
        Script(
            turns=[Turn(content="## Answer\nRouted.")],
            rate_limit=RateLimit(requests=ROUTED_LIMIT, window_s=WINDOW_S),
        )
    )
    limit = ProviderLimit(base_url=llm.base_url, requests=ROUTED_LIMIT, window_s=WINDOW_S)
    async with keel_app(llm, llm_max_attempts=6, provider_limits=[limit]) as http:
        ids = await asyncio.gather(
            *(
                routed(http, workspace, "Use the investigate agent: why is add() slow?")
                for _ in range(ROUTED_RUNS)
            )
        )
        runs = await asyncio.gather(*(finished(http, i) for i in ids))
    assert [r["status"] for r in runs] == ["completed"] * ROUTED_RUNS, [
        r.get("error") for r in runs
    ]
    assert all([c["agent"] for c in r["children"]] == ["investigate"] for r in runs)
    play = llm.play
    # Every run made its router's call and its child's step: twice the runs at the least.
    sent = len(play.received_at) - play.rate_limited
    assert sent >= 2 * ROUTED_RUNS, sent
    # Six router calls at once against three a window: without a turn to wait for, all six
    # arrived together and nine requests were refused. Paced, the fourth comes at least a
    # window after the first (an arrival late under load can still meet a refusal).
    arrivals = sorted(play.received_at)
    assert arrivals[ROUTED_LIMIT] - arrivals[0] >= WINDOW_S * 0.9, arrivals
    assert play.rate_limited <= ROUTED_LIMIT, play.rate_limited
