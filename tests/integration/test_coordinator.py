"""The coordinator delegates over A2A to Keel's own agents and merges their reports."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from temporalio.client import Client

from activities.store.run_store import Store
from api.cli.local_stack import serve_api
from tests.conftest import in_process_worker
from worker.dev_stack import free_port
from worker.scripted_llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from worker.settings import Settings
from workflows.coordination import CoordinatorInput, RemoteAgent
from workflows.coordinator import CoordinatorWorkflow


async def test_two_agents_merged_and_an_unreachable_one_marked(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: Callable[[Script], ScriptedLLMServer],
    settings_for: Callable[..., Settings],
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(name="read_file", arguments={"path": "pkg/core.py"})
                    ]
                ),
                Turn(content="Findings from {files_read}"),
            ]
        )
    )
    port = free_port()
    settings = settings_for(llm, workspace, api_port=port)
    dead = f"http://127.0.0.1:{free_port()}"
    async with in_process_worker(temporal_client, store, settings), serve_api(settings) as url:
        request = CoordinatorInput(
            task="Review pkg/core.py",
            agents=[
                RemoteAgent(url=f"{url}/a2a/review", name="Reviewer"),
                RemoteAgent(url=f"{url}/a2a/investigate"),
                RemoteAgent(url=dead, name="Offline"),
            ],
            tenant_id="default",
            requester="user:alice",
            timeout_s=120,
        )
        result = await temporal_client.execute_workflow(
            CoordinatorWorkflow.run,
            request,
            id=f"coord-{uuid.uuid4().hex[:8]}",
            task_queue=settings.task_queue,
        )
    statuses = {o.agent_name: o.status for o in result.outcomes}
    assert statuses == {
        "Reviewer": "completed",
        "Keel investigate": "completed",
        "Offline": "unreachable",
    }
    report = result.report
    assert "2 of 3 agents answered" in report
    assert report.count("Findings from - pkg/core.py") == 2
    assert "## Offline — unreachable" in report and "This section is missing" in report
    runs = await store.list_runs(tenant_id="default", limit=50)
    delegated = [r for r in runs if r.trigger == "a2a" and r.requester == "user:alice"]
    assert {r.agent for r in delegated} >= {"review", "investigate"}
