"""The `issues` agent triages a repository through `list_issues`, Keel's own plugin tool.

A local stand-in of the GitHub REST API serves two pages of issues (linked by the
`Link` header) and answers the first request for the second page with a rate-limit
refusal; the run goes through a real worker, the scripted model and Postgres.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.worker.agent_catalog import AgentCatalog
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn
from tests.conftest import in_process_worker
from tests.integration.runs import start_run
from tests.integration.test_mcp_tools import call, history_text, tool_messages

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
TOKEN = "ghp_standin0123456789abcdef"


def issue(number: int, title: str, updated: str, *, pull: bool = False, body: str = "") -> Any:
    item: dict[str, Any] = {
        "number": number,
        "title": title,
        "state": "open",
        "labels": [{"name": "bug"}] if "crash" in title else [],
        "user": {"login": "dev"},
        "created_at": "2026-01-02T10:00:00Z",
        "updated_at": updated,
        "comments": number,
        "body": body,
    }
    if pull:
        item["pull_request"] = {"url": f"https://example/pulls/{number}"}
    return item


PAGE_1 = [
    issue(
        5, "App crash on empty config", "2026-11-20T09:00:00Z", body="Steps: run `app --config ''`"
    ),
    issue(4, "Fix typo in README", "2026-11-18T09:00:00Z", pull=True),
    issue(3, "Crash when config is empty", "2026-11-01T09:00:00Z"),
]
PAGE_2 = [
    issue(2, "Support YAML anchors", "2026-03-01T09:00:00Z"),
    issue(1, "Old idea: themes", "2025-06-01T09:00:00Z"),
]


class GitHubStandIn:
    """Two pages of issues; the first request for page 2 is rate-limited."""

    def __init__(self) -> None:
        self.url = ""
        self.requests: list[tuple[str, str | None, float]] = []
        self._limited = False

    async def issues(self, request: Request) -> JSONResponse:
        page = request.query_params.get("page", "1")
        self.requests.append((page, request.headers.get("authorization"), time.monotonic()))
        if request.path_params["repo"] != "acme/widgets":
            return JSONResponse({"message": "Not Found"}, status_code=404)
        if page == "1":
            link = (
                f'<{self.url}/repos/acme/widgets/issues?state=open&per_page=100&page=2>; rel="next"'
            )
            return JSONResponse(PAGE_1, headers={"link": link})
        if not self._limited:
            self._limited = True
            reset = str(int(time.time()) + 1)
            return JSONResponse(
                {"message": "API rate limit exceeded"},
                status_code=403,
                headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset},
            )
        return JSONResponse(PAGE_2)


@asynccontextmanager
async def serving(standin: GitHubStandIn) -> AsyncIterator[GitHubStandIn]:
    app = Starlette(routes=[Route("/repos/{repo:path}/issues", standin.issues)])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.05)
        standin.url = f"http://127.0.0.1:{port}"
        yield standin
    finally:
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)


async def test_the_issues_agent_lists_two_pages_through_a_rate_limit_and_triages(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[call("list_issues", repo="acme/widgets")]),
                Turn(content="## Stale\n- #1\n## Likely duplicates\n- #3 and #5"),
            ]
        )
    )
    async with serving(GitHubStandIn()) as github:
        # The plugin reads the worker's settings from the environment when it loads.
        monkeypatch.setenv("KEEL_GITHUB_API_URL", github.url)
        monkeypatch.setenv("KEEL_GITHUB_TOKEN", TOKEN)
        settings = settings_for(llm, workspace)
        spec = AgentCatalog.load().get("issues")
        assert spec is not None and spec.tools == ["list_issues"]
        async with in_process_worker(temporal_client, store, settings):
            handle = await start_run(
                temporal_client, settings, workspace, spec=spec, prompt="Triage acme/widgets."
            )
            result = await handle.result()

    assert result.status == "completed"
    [listing] = tool_messages(llm, 1)
    lines = listing.splitlines()
    assert lines[0] == "acme/widgets: 5 open issues and pull requests"
    numbers = [line.split()[0] for line in lines if line.startswith("#")]
    assert numbers == ["#5", "#4", "#3", "#2", "#1"]
    assert "#4 [PR] [open] Fix typo in README" in listing
    assert "#5 [issue] [open] [bug] App crash on empty config" in listing
    assert "    Steps: run `app --config ''`" in listing
    assert "updated 2025-06-01" in listing
    # Page 1, page 2 refused by the rate limit, page 2 again once the limit reset.
    assert [page for page, _, _ in github.requests] == ["1", "2", "2"]
    assert {auth for _, auth, _ in github.requests} == {f"Bearer {TOKEN}"}
    assert github.requests[2][2] - github.requests[1][2] >= 0.4
    assert TOKEN not in await history_text(handle)
