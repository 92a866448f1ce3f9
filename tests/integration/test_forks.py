"""Rewind and fork: a fork at step 3 of a 6-step run reads exactly the original's first
three steps (and the new message), leaves the original as it was, and refuses another
tenant and a step the run does not have."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.conftest import JWT_SECRET, token_for
from tests.integration.conftest import LaunchKeel
from tests.integration.keel_http import MALLORY, base_url, finished
from tests.integration.test_cli import clean_env, keel
from tests.integration.test_mcp import call, mcp_client, refused
from tests.integration.test_run_list import audited

HISTORIES = Path(__file__).parent.parent / "histories"
HINT = "Look at pkg/core.py's TODO before answering."
FINDING = {"file": "pkg/core.py", "line": 2, "severity": "medium", "title": "add ignores None"}


def six_steps() -> Script:
    """Five rounds of reads, each seeing something new, then the answer: six steps."""
    reads = [
        [ScriptedToolCall(name="list_files", arguments={})],
        [
            ScriptedToolCall(name="read_file", arguments={"path": "pkg/core.py"}),
            ScriptedToolCall(name="report_finding", arguments=FINDING),
        ],
        [ScriptedToolCall(name="read_file", arguments={"path": "README.md"})],
        [ScriptedToolCall(name="read_file", arguments={"path": "pkg/__init__.py"})],
        [ScriptedToolCall(name="search_code", arguments={"pattern": "TODO"})],
    ]
    answer = "## Answer\nadd() does not handle None.\n## Evidence\npkg/core.py:2\n"
    return Script(turns=[*(Turn(tool_calls=calls) for calls in reads), Turn(content=answer)])


async def rows_of(store: Store, run_id: str) -> dict[str, list[Any]]:
    """Everything Postgres keeps of a run, to compare before and after a fork."""
    tables = {
        "runs": "SELECT * FROM runs WHERE id = %s",
        "messages": "SELECT * FROM messages WHERE run_id = %s ORDER BY step, ord",
        "events": "SELECT run_id, seq, type, data FROM events WHERE run_id = %s ORDER BY seq",
        "llm_calls": "SELECT * FROM llm_calls WHERE run_id = %s ORDER BY step",
        "tool_executions": "SELECT * FROM tool_executions WHERE run_id = %s ORDER BY 1, 2",
    }
    found: dict[str, list[Any]] = {}
    async with store.pool.connection() as conn:
        for table, sql in tables.items():
            cur = await conn.execute(sql, (run_id,))  # type: ignore[arg-type]
            found[table] = list(await cur.fetchall())
    return found


async def test_a_fork_at_step_three_reads_exactly_the_first_three_steps(
    keel_app: LaunchKeel,
    scripted: Any,
    temporal_client: Client,
    store: Store,
    workspace: Path,
) -> None:
    llm = scripted(six_steps())
    async with keel_app(llm) as http:
        created = await http.post(
            "/v1/runs",
            json={"agent": "investigate", "input": "Why does add fail?", "workspace": "."},
        )
        assert created.status_code == 201, created.text
        original = await finished(http, created.json()["id"])
        assert original["status"] == "completed" and original["steps"] == 6, original
        run_id = original["id"]
        # Turn 3 is asked by the request that carries three model messages: step 4's.
        fourth = llm.last_request(3)
        before = await rows_of(store, run_id)
        # Postgres says completed a moment before the workflow closes its history.
        await temporal_client.get_workflow_handle(run_id).result()
        history = await temporal_client.get_workflow_handle(run_id).fetch_history()
        llm.reset()

        body = {"step": 3, "message": HINT, "run_id": f"{run_id}-fork"}
        forked = await http.post(f"/v1/runs/{run_id}/fork", json=body)
        assert forked.status_code == 201, forked.text
        fork = forked.json()
        assert (fork["forked_from"], fork["forked_at_step"]) == (run_id, 3), fork
        assert (fork["agent"], fork["workspace"]) == ("investigate", original["workspace"])
        assert fork["forked_tree"] is None, "no git work tree here, and trees are off"
        again = await http.post(f"/v1/runs/{run_id}/fork", json=body)
        assert (again.status_code, again.json()["id"]) == (201, fork["id"]), again.text
        other = await http.post(f"/v1/runs/{run_id}/fork", json={**body, "step": 2})
        assert other.status_code == 409, other.text

        done = await finished(http, fork["id"])
        assert done["status"] == "completed", done
        assert (done["forked_from"], done["forked_at_step"]) == (run_id, 3), done
        # The finding recorded at step 2 is the fork's too: its model read it being made.
        assert [(f["file"], f["title"]) for f in done["findings"]] == [
            ("pkg/core.py", "add ignores None")
        ], done["findings"]
        # The fork's first model request: the original's opening and first three steps,
        # exactly as the original's fourth call sent them, then the new message.
        first = llm.last_request(3)
        assert first["messages"] == [*fourth["messages"], {"role": "user", "content": HINT}]
        assert llm.requests_by_turn[0] == 0, "the fork did not start its conversation over"

        # The original is untouched: its rows and its workflow history.
        assert await rows_of(store, run_id) == before
        after = await temporal_client.get_workflow_handle(run_id).fetch_history()
        assert after.to_json_dict() == history.to_json_dict()

        # Refusals: another tenant's run is a 404 (audited), a step it lacks a 422.
        foreign = await http.post(f"/v1/runs/{run_id}/fork", json={"step": 1}, headers=MALLORY)
        assert foreign.status_code == 404, foreign.text
        assert await audited(store, "other-tenant", "run.cross_tenant_denied", run_id)
        past = await http.post(f"/v1/runs/{run_id}/fork", json={"step": 7})
        assert past.status_code == 422, past.text
        assert "has 6 steps; fork at a step from 0 to 6" in past.text, past.text
        for bad in (
            {"step": -1},
            {"step": 1, "replace_message": True},
            {},
            {"step": 1, "workspace": "0" * 4096},  # a name too long for the file system
        ):
            refused = await http.post(f"/v1/runs/{run_id}/fork", json=bad)
            assert refused.status_code == 422, (bad, refused.text)

        fork_history = await temporal_client.get_workflow_handle(fork["id"]).fetch_history()
        if os.environ.get("KEEL_RECORD_HISTORY"):
            # KEEL_RECORD_HISTORY=1: keep the fork's history for test_replay.
            target = HISTORIES / "agent_run_fork.json"
            target.write_text(json.dumps(fork_history.to_json_dict(), indent=1))


async def test_a_fork_with_a_replaced_task_starts_from_it_on_every_door(
    keel_app: LaunchKeel, scripted: Any, workspace: Path, tmp_path: Path
) -> None:
    llm = scripted(six_steps())
    async with keel_app(llm) as http:
        created = await http.post(
            "/v1/runs",
            json={"agent": "investigate", "input": "Why does add fail?", "workspace": "."},
        )
        original = await finished(http, created.json()["id"])
        second = llm.last_request(1)
        llm.reset()
        task = "Why is add untyped?"
        forked = await http.post(
            f"/v1/runs/{original['id']}/fork",
            json={"step": 1, "message": task, "replace_message": True},
        )
        assert forked.status_code == 201, forked.text
        await finished(http, forked.json()["id"])
        first = llm.last_request(1)["messages"]
        assert first[1] == {"role": "user", "content": task}, first
        assert first[2:] == second["messages"][2:] and first[0] == second["messages"][0]

        # MCP forks the same way, through the same service.
        async with (
            mcp_client(base_url(http), token_for("default", "alice")) as alice,
            mcp_client(base_url(http), token_for("other-tenant", "mallory")) as mallory,
        ):
            detail = await call(alice, "fork_run", run_id=original["id"], step=0)
            assert (detail["run"]["forked_from"], detail["run"]["forked_at_step"]) == (
                original["id"],
                0,
            )
            refusal = await refused(mallory, "fork_run", run_id=original["id"], step=0)
            assert f"No run {original['id']}." in refusal, refusal


@pytest.mark.slow
async def test_the_cli_forks_a_run_and_shows_its_lineage(
    keel_app: LaunchKeel, scripted: Any, workspace: Path, tmp_path: Path
) -> None:
    """Three `keel` processes: the slow lane."""
    async with keel_app(scripted(six_steps())) as http:
        created = await http.post(
            "/v1/runs",
            json={"agent": "investigate", "input": "Why does add fail?", "workspace": "."},
        )
        original = await finished(http, created.json()["id"])
        env = clean_env(
            KEEL_API_URL=base_url(http),
            KEEL_DATA_DIR=str(tmp_path / "cli"),
            KEEL_JWT_SECRET=JWT_SECRET,
        )
        code, out = await keel("fork", original["id"], "--step", "2", "--message", HINT, env=env)
        assert code == 0, out
        found = re.search(r"Run (run-\w+) \(investigate\) forked from (\S+) at step 2", out)
        assert found is not None and found.group(2) == original["id"], out
        code, shown = await keel("runs", "show", found.group(1), env=env)
        assert code == 0 and f"forked from  {original['id']} at step 2" in shown, shown
        code, past = await keel("fork", original["id"], "--step", "9", env=env)
        assert code == 1 and "has 6 steps" in past, past
