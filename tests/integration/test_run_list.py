"""Run lists show the runs users started: top-level by default, children on request.

A review delegates to sub-agents; `GET /v1/runs` and `keel runs list` must show the
review (with its child count) and not bury it among its children, which `children=include`
and `parent=RUN_ID` still list, paged by cursor, within the caller's tenant only.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from keel.activities.store.run_store import Store
from tests.conftest import JWT_SECRET, token_for
from tests.integration.conftest import LaunchKeel
from tests.integration.keel_http import MALLORY, base_url
from tests.integration.test_cli import clean_env, keel
from tests.integration.test_mcp import call, mcp_client
from tests.integration.test_subagents import delegating_review


async def audited(store: Store, tenant_id: str, action: str, subject: str) -> bool:
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT 1 FROM audit_log WHERE tenant_id = %s AND action = %s AND subject = %s",
            (tenant_id, action, subject),
        )
        return await cur.fetchone() is not None


async def all_pages(http: httpx.AsyncClient, **params: str | int) -> list[dict[str, object]]:
    """Every run a filtered list holds, following `next_cursor` with the same filters."""
    runs: list[dict[str, object]] = []
    cursor: str | None = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        response = await http.get("/v1/runs", params=query)
        assert response.status_code == 200, response.text
        page = response.json()
        runs += page["runs"]
        cursor = page["next_cursor"]
        if cursor is None:
            return runs


async def test_lists_show_top_level_runs_with_child_counts_and_children_on_request(
    store: Store, workspace: Path, tmp_path: Path, keel_app: LaunchKeel
) -> None:
    async with keel_app(delegating_review()) as http:
        url = base_url(http)
        env = clean_env(
            KEEL_API_URL=url, KEEL_DATA_DIR=str(tmp_path / "cli"), KEEL_JWT_SECRET=JWT_SECRET
        )
        code, out = await keel("review", str(workspace), env=env)
        assert code == 0, out
        found = re.search(r"Run (run-\w+)", out)
        assert found is not None
        run_id = found.group(1)
        children = {f"{run_id}-task-2-2", f"{run_id}-task-2-3"}

        top = await all_pages(http, limit=200)
        assert all(r["parent_run_id"] is None for r in top)
        review = next(r for r in top if r["id"] == run_id)
        assert review["child_count"] == 2
        assert not children & {str(r["id"]) for r in top}

        everything = {str(r["id"]) for r in await all_pages(http, children="include")}
        assert {run_id, *children} <= everything

        # One run's children, a page of one at a time: the cursor keeps the filter.
        listed = await all_pages(http, parent=run_id, limit=1)
        assert {str(r["id"]) for r in listed} == children and len(listed) == 2
        assert all(r["parent_run_id"] == run_id and r["child_count"] == 0 for r in listed)
        by_trigger = await all_pages(http, trigger="parent", limit=200)
        assert children <= {str(r["id"]) for r in by_trigger}

        bad = await http.get("/v1/runs", params={"children": "all"})
        assert bad.status_code == 422, bad.text
        missing = await http.get("/v1/runs", params={"parent": "run-nobody"})
        assert missing.status_code == 404, missing.text

        # A2A's ListTasks and MCP's list_runs list what the caller started, as REST does.
        listed_tasks = await http.post(
            "/a2a/",
            json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
            headers={"A2A-Version": "1.0"},
        )
        task_ids = {t["id"] for t in listed_tasks.json()["result"]["tasks"]}
        assert run_id in task_ids and not children & task_ids, listed_tasks.text
        async with mcp_client(url, token_for("default", "alice")) as client:
            mcp_runs = {r["id"] for r in (await call(client, "list_runs", limit=200))["runs"]}
            assert run_id in mcp_runs and not children & mcp_runs, mcp_runs

        async with httpx.AsyncClient(base_url=url, headers=MALLORY, timeout=30) as other:
            refused = await other.get("/v1/runs", params={"parent": run_id})
            assert refused.status_code == 404, refused.text
            assert refused.json()["detail"] == f"No run {run_id}.", refused.text
        assert await audited(store, "other-tenant", "run.cross_tenant_denied", run_id)

        # Wide enough that other runs' longer cells in this database shorten no column.
        wide = {**env, "COLUMNS": "250"}
        code, listed_out = await keel("runs", "list", "--limit", "200", env=wide)
        assert code == 0, listed_out
        line = next(x for x in listed_out.splitlines() if run_id in x)
        assert re.search(r"\b2\b", line.split("review", 1)[1]), line
        assert not any(c in listed_out for c in children), listed_out
        code, kids_out = await keel("runs", "list", "--parent", run_id, env=env)
        assert code == 0, kids_out
        assert all(c in kids_out for c in children), kids_out
        code, with_out = await keel("runs", "list", "--children", "--limit", "200", env=env)
        assert code == 0, with_out
        assert all(c in with_out for c in children), with_out
