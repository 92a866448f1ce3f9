"""Run budgets: a ceiling in US dollars (and tokens) over a run's whole tree.

The scripted model prices like a paid one here (`KEEL_PRICES` for its name), so every
recorded model call has a cost; the tree's cost is read back from the calls Postgres
recorded, not from what the workflow counted.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from a2a.types import GetTaskRequest
from temporalio.client import Client
from temporalio.worker import Replayer

from keel.activities.llm.prices import ModelPrice
from keel.activities.store.run_store import Store
from keel.activities.store.run_tree import RunTreeStore
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Conversation, Script, ScriptedLLMServer, Turn
from keel.worker.temporal_client import DATA_CONVERTER
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.coverage_plan import COVERAGE_SECTION_HEADING
from tests.conftest import JWT_SECRET, auth_headers, in_process_worker, token_for
from tests.integration.keel_http import LaunchKeel, finished
from tests.integration.test_a2a import a2a_client
from tests.integration.test_cli import clean_env, keel
from tests.integration.test_coverage import WINDOW, reviewed, workspace_with_extras
from tests.integration.test_mcp import call, mcp_client
from tests.integration.test_mcp import refused as tool_error
from tests.integration.test_schedules import create, describe, tenant_headers
from tests.integration.test_subagents import read, task

HISTORIES = Path(__file__).parent.parent / "histories"
StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
# A paid model's prices for the scripted one: $10 a million prompt tokens, $30 completion.
PRICE = ModelPrice(input_per_mtok=10.0, output_per_mtok=30.0)
PRICES = {"scripted": PRICE}

TREE_CALLS_SQL = (
    "SELECT coalesce(sum(cost_usd), 0)::float AS spent, coalesce(max(cost_usd), 0)::float AS"
    " largest, count(*) AS calls FROM llm_calls WHERE run_id = ANY(%s)"
)


async def tree_calls(
    store: Store, run_id: str, tenant: str = "default"
) -> tuple[float, float, int]:
    """The recorded cost of a run's tree: the sum of its model calls, the largest, how many."""
    tree = await RunTreeStore(store.pool).subtree(tenant, run_id)
    assert tree
    async with store.pool.connection() as conn:
        cur = await conn.execute(TREE_CALLS_SQL, ([r.id for r in tree],))
        row = await cur.fetchone()
    assert row is not None
    return float(row["spent"]), float(row["largest"]), int(row["calls"])


async def test_a_cost_ceiling_that_cannot_cover_everything_ends_partial_on_every_surface(
    temporal_client: Client,
    store: Store,
    scripted: StartLLM,
    settings_for: MakeSettings,
    tmp_path: Path,
) -> None:
    ws = workspace_with_extras(tmp_path / "ws", total_bytes=300_000)
    llm = scripted(Script(name="scripted", policy="plain_reviewer", context_window=WINDOW))
    settings = settings_for(
        llm,
        ws.root,
        model_context_window=WINDOW,
        coverage_plans=True,
        api_port=free_port(),
        prices=PRICES,
    )
    ceiling = 0.5
    async with in_process_worker(temporal_client, store, settings), serve_api(settings) as url:
        env = clean_env(
            KEEL_API_URL=url, KEEL_DATA_DIR=str(tmp_path / "cli"), KEEL_JWT_SECRET=JWT_SECRET
        )
        code, out = await keel("review", str(ws.root), "--max-cost", str(ceiling), env=env)
        assert code == 0, out
        found = re.search(r"Run (run-\w+)", out)
        assert found is not None
        run_id = found[1]
        async with httpx.AsyncClient(base_url=url, headers=auth_headers()) as http:
            got = (await http.get(f"/v1/runs/{run_id}")).json()
        # Wider still: other tests' runs in this database may have long ids and agents,
        # and a squeezed status column would fold "completed · partial" over two lines.
        code, listed = await keel("runs", "list", env={**env, "COLUMNS": "400"})
        assert code == 0, listed
        async with a2a_client(url, streaming=False) as a2a:
            as_task = await a2a.get_task(GetTaskRequest(id=run_id))
        async with mcp_client(url, token_for()) as mcp:
            as_mcp = await call(mcp, "get_run", run_id=run_id)
            recent = await call(mcp, "list_runs", limit=5)

    assert got["status"] == "completed" and got["stop_reason"] == "budget", got["error"]
    coverage = got["coverage"]
    assert coverage["status"] == "partial"
    assert 0 < coverage["files_covered"] < coverage["files_total"] == len(ws.files)
    # Every file left unread says why, naming the ceiling as the user set it.
    missed = set(ws.files) - set(reviewed(got["report"].split(COVERAGE_SECTION_HEADING, 1)[1]))
    assert set(coverage["not_covered"]) == missed
    assert all(
        why.startswith("budget spent") and "max_cost_usd 0.5" in why
        for why in coverage["not_covered"].values()
    ), coverage["not_covered"]
    last = next(line for line in reversed(out.splitlines()) if line.startswith("completed · "))
    assert last.startswith(
        f"completed · partial · {coverage['files_covered']} of {len(ws.files)} files · "
        "stop reason budget"
    ), last

    # What the tree's model calls cost, as Postgres recorded them: within one call of the
    # ceiling, and what every surface shows as the tree's cost.
    spent, largest, calls = await tree_calls(store, run_id)
    assert calls > 1 and largest > 0
    assert spent <= ceiling + largest, (spent, largest)
    assert abs(got["total_usage"]["cost_usd"] - spent) < 1e-5

    # Partial, wherever the run is listed or read.
    [row] = [line for line in listed.splitlines() if run_id in line]
    assert "completed · partial" in row and "budget" in row, listed
    assert as_task.metadata["coverage"] == "partial"
    assert as_task.metadata["stopReason"] == "budget"
    assert as_task.metadata["filesCovered"] == coverage["files_covered"]
    shown = as_mcp["run"]
    assert shown["coverage"]["status"] == "partial" and shown["stop_reason"] == "budget"
    [summary] = [r for r in recent["runs"] if r["id"] == run_id]
    assert summary["coverage"] == (
        f"partial · {coverage['files_covered']} of {coverage['files_total']} files"
    )
    assert summary["stop_reason"] == "budget"


def reading_turns(reads: int, answer: str = "done reading") -> list[Turn]:
    """A model that reads the same file again and again, each request larger."""
    grows = [
        Turn(tool_calls=[read("pkg/core.py")], prompt_tokens=2_000 * (i + 1)) for i in range(reads)
    ]
    return [*grows, Turn(content=answer, prompt_tokens=2_000 * (reads + 1))]


def reading_child(match: str, reads: int) -> Conversation:
    """A sub-agent that reads the same file again and again, each request larger."""
    return Conversation(match=match, turns=reading_turns(reads, f"{match} done"))


def uncapped_cost(script: Script) -> float:
    turns = [*script.turns, *(t for c in script.conversations for t in c.turns)]
    return sum(PRICE.cost(t.prompt_tokens, t.completion_tokens) for t in turns)


async def test_a_sub_agent_tree_spends_within_its_parents_cost_ceiling(
    keel_app: LaunchKeel, store: Store, temporal_client: Client
) -> None:
    script = Script(
        turns=[
            Turn(
                tool_calls=[
                    task("explore", "CHILD-A: read pkg/core.py"),
                    task("explore", "CHILD-B: read pkg/core.py"),
                    task("explore", "CHILD-C: read pkg/core.py"),
                ]
            ),
            Turn(content="## Summary\nThe children read pkg/core.py.", prompt_tokens=3_000),
        ],
        conversations=[reading_child(f"CHILD-{c}", reads=12) for c in "ABC"],
    )
    ceiling = 0.5
    # Left alone the tree would spend several times its ceiling, so the test can fail.
    assert uncapped_cost(script) > 4 * ceiling
    async with keel_app(script, prices=PRICES) as http:
        created = await http.post(
            "/v1/runs",
            json={
                "agent": "review",
                "input": "Review pkg/core.py with three explorers.",
                "workspace": ".",
                "max_cost_usd": ceiling,
            },
        )
        assert created.status_code == 201, created.text
        run = await finished(http, created.json()["id"])

    assert run["status"] == "completed", run["error"]
    children = run["children"]
    # The paths that share a cost ceiling (the parent) and stop on it (a child) replay.
    replayer = Replayer(workflows=[AgentRunWorkflow], data_converter=DATA_CONVERTER)
    for run_id, name in ((run["id"], "parent"), (children[0]["id"], "child")):
        history = await temporal_client.get_workflow_handle(run_id).fetch_history()
        assert (await replayer.replay_workflow(history)).replay_failure is None
        if os.environ.get("KEEL_RECORD_HISTORY"):
            (HISTORIES / f"agent_run_cost_ceiling_{name}.json").write_text(
                json.dumps(history.to_json_dict(), indent=1)
            )
    assert len(children) == 3
    # Each explorer stopped at its share of what the parent had left, not at its steps.
    assert {c["stop_reason"] for c in children} == {"budget"}, children
    assert all(c["steps"] < 13 for c in children)
    spent, largest, _ = await tree_calls(store, run["id"])
    assert spent <= ceiling + largest, (spent, largest)
    assert abs(run["total_usage"]["cost_usd"] - spent) < 1e-5


async def test_a_schedules_ceiling_holds_the_runs_it_starts(
    keel_app: LaunchKeel, store: Store, workspace: Path
) -> None:
    script = Script(turns=reading_turns(12))
    assert uncapped_cost(script) > 8 * 0.1
    tenant, headers = tenant_headers()
    async with keel_app(script, headers=headers, prices=PRICES) as http:
        made = await create(
            http, workspace, cron_expressions=["0 3 * * *"], paused=True, max_cost_usd=0.5
        )
        sid = made["id"]
        assert made["max_cost_usd"] == 0.5 and made["max_total_tokens"] is None
        changed = await http.patch(f"/v1/schedules/{sid}", json={"max_cost_usd": 0.1})
        assert changed.status_code == 200, changed.text
        assert (await describe(http, sid))["max_cost_usd"] == 0.1
        refused = await http.patch(f"/v1/schedules/{sid}", json={"max_cost_usd": 0})
        assert refused.status_code == 422 and "max_cost_usd" in refused.text
        triggered = await http.post(f"/v1/schedules/{sid}/trigger")
        assert triggered.status_code == 202, triggered.text
        run = await finished(http, triggered.json()["run_id"], headers=headers)
        await http.delete(f"/v1/schedules/{sid}")
    assert run["status"] == "completed" and run["stop_reason"] == "budget", run
    assert run["steps"] < 12
    spent, largest, _ = await tree_calls(store, run["id"], tenant)
    assert spent <= 0.1 + largest, (spent, largest)


# Eight keel CLI processes: the slow lane, which CI runs after the README's command,
# so that command stays within 8 minutes.
@pytest.mark.slow
async def test_a_cost_ceiling_that_is_not_a_positive_number_or_cannot_hold_is_refused(
    keel_app: LaunchKeel, workspace: Path, tmp_path: Path
) -> None:
    async with keel_app(Script(turns=[Turn(content="never asked")])) as http:
        for given in (-1, 0, "a lot"):
            refused = await http.post(
                "/v1/runs",
                json={"agent": "review", "input": "x", "workspace": ".", "max_cost_usd": given},
            )
            assert refused.status_code == 422, refused.text
            assert "max_cost_usd" in refused.text
        url = str(http.base_url).rstrip("/")
        env = clean_env(
            KEEL_API_URL=url, KEEL_DATA_DIR=str(tmp_path / "cli"), KEEL_JWT_SECRET=JWT_SECRET
        )
        for given, sentence in (
            ("-1", "--max-cost: Must be more than 0, not -1"),
            ("0", "--max-cost: Must be more than 0, not 0"),
            ("lots", "--max-cost: 'lots' is not a number; give US dollars, such as 0.50."),
            ("nan", "--max-cost: 'nan' is not a number; give US dollars, such as 0.50."),
        ):
            code, out = await keel("review", str(tmp_path), "--max-cost", given, env=env)
            assert code == 1 and sentence in out, out
            code, out = await keel("run", "review", "x", "--max-cost", given, env=env)
            assert code == 1 and sentence in out, out
        # This Keel has no price for its model: a ceiling in dollars could never hold.
        unpriced = await http.post(
            "/v1/runs",
            json={"agent": "review", "input": "x", "workspace": ".", "max_cost_usd": 1.0},
        )
        assert unpriced.status_code == 422, unpriced.text
        assert "The model scripted has no price" in unpriced.text, unpriced.text
        code, out = await keel("review", str(workspace), "--max-cost", "1", env=env)
        assert code == 1 and "--max-cost: The model scripted has no price" in out, out
        async with mcp_client(url, token_for()) as mcp:
            for given in (0, -1):
                said = await tool_error(
                    mcp, "start_run", agent="review", input="x", workspace=".", max_cost_usd=given
                )
                assert "max_cost_usd" in said and "more than 0" in said, said
