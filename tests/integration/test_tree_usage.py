"""What a run costs is its tree's: every surface shows the sum of the model calls recorded
for the run and its sub-agent runs, with the run's own beside it where both appear."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer
from tests.conftest import JWT_SECRET, auth_headers, in_process_worker
from tests.integration.test_cli import clean_env, keel
from tests.integration.test_schedules import Receiver
from tests.integration.test_subagents import delegating_review

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]

TREE_CALLS_SQL = """
WITH RECURSIVE tree AS (
    SELECT id FROM runs WHERE id = %s
    UNION ALL SELECT r.id FROM runs r JOIN tree t ON r.parent_run_id = t.id
)
SELECT count(DISTINCT tree.id) AS runs, sum(c.prompt_tokens) AS prompt,
       sum(c.completion_tokens) AS completion
FROM tree JOIN llm_calls c ON c.run_id = tree.id
"""


async def recorded_calls(store: Store, run_id: str) -> tuple[int, int, int]:
    """Runs, prompt and completion tokens of the tree's recorded model calls."""
    async with store.pool.connection() as conn:
        row = await (await conn.execute(TREE_CALLS_SQL, (run_id,))).fetchone()
        own = await (
            await conn.execute(
                "SELECT sum(prompt_tokens + completion_tokens) AS n FROM llm_calls"
                " WHERE run_id = %s",
                (run_id,),
            )
        ).fetchone()
    assert row is not None and own is not None
    assert int(own["n"]) < int(row["prompt"]) + int(row["completion"])  # sub-agents spent too
    return int(row["runs"]), int(row["prompt"]), int(row["completion"])


@pytest.mark.slow  # starts `keel` processes, as the other tests of the slow lane do
async def test_the_cli_rest_and_run_lists_show_the_trees_recorded_usage(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(delegating_review())
    settings = settings_for(llm, workspace, api_port=free_port())
    async with in_process_worker(temporal_client, store, settings), serve_api(settings) as url:
        env = clean_env(
            KEEL_API_URL=url, KEEL_DATA_DIR=str(tmp_path / "cli"), KEEL_JWT_SECRET=JWT_SECRET
        )
        code, out = await keel("review", str(workspace), env={**env, "COLUMNS": "200"})
        assert code == 0, out
        found = re.search(r"Run (run-\w+)", out)
        assert found is not None
        run_id = found.group(1)
        runs, prompt, completion = await recorded_calls(store, run_id)
        total = prompt + completion
        assert runs == 3

        # The CLI's last line: the tree's tokens, the run's own beside them.
        last = [line for line in out.splitlines() if "tool calls ·" in line][-1]
        assert f"· {total} tokens with 2 sub-agent runs (" in last, last
        code, listing = await keel("runs", "list", env={**env, "COLUMNS": "200"})
        [row] = [line for line in listing.splitlines() if run_id in line]
        assert code == 0 and f" {total} " in row, listing
        code, shown = await keel("runs", "show", run_id, env=env)
        assert code == 0 and f"· {total} tokens with 2 sub-agent runs (" in shown, shown

        async with httpx.AsyncClient(base_url=url, headers=auth_headers()) as http:
            run = (await http.get(f"/v1/runs/{run_id}")).json()
            listed = (await http.get("/v1/runs")).json()["runs"]
            rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": run_id}}
            task = (await http.post("/a2a", json=rpc, headers={"A2A-Version": "1.0"})).json()
        tree = run["total_usage"]
        assert (tree["prompt_tokens"], tree["completion_tokens"]) == (prompt, completion)
        assert (tree["total_tokens"], tree["runs"]) == (total, 3)
        assert run["usage"]["total_tokens"] < total  # `usage` stays the run's own
        [item] = [r for r in listed if r["id"] == run_id]
        assert item["total_usage"] == tree
        metadata = task["result"]["metadata"]  # A2A's task view
        assert (metadata["totalTokens"], metadata["runs"]) == (total, 3), metadata


async def test_a_webhook_notice_carries_the_trees_usage(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(delegating_review())
    settings = settings_for(llm, workspace, api_port=free_port())
    with Receiver() as receiver:
        async with (
            in_process_worker(temporal_client, store, settings),
            serve_api(settings) as url,
            httpx.AsyncClient(base_url=url, headers=auth_headers()) as http,
        ):
            body = {
                "agent": "review",
                "input": "Review it",
                "workspace": str(workspace),
                "webhook_url": receiver.url,
            }
            run_id = (await http.post("/v1/runs", json=body)).json()["id"]
            _, notice = await receiver.notice("run.finished")
    runs, prompt, completion = await recorded_calls(store, run_id)
    usage = json.loads(notice)["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["runs"]) == (
        prompt,
        completion,
        runs,
    )
