"""Helpers to start runs and read what they left behind."""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.client import Client, WorkflowHandle

from keel.worker.agent_catalog import AgentCatalog
from keel.worker.config.settings import Settings
from keel.workflows import timeouts
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.agent_spec import AgentSpec, Limits
from keel.workflows.run.models import RunInput, RunResult

READ_TOOLS = ["list_files", "read_file", "search_code"]


def agent(name: str = "review", *, coverage_plans: bool = False, **limits: int) -> AgentSpec:
    """The built-in agent, with limits overridden for the test (and no coverage plan unless
    asked: scripted turns play the model's own way through a review)."""
    spec = AgentCatalog.load(coverage_plans=coverage_plans).get(name)
    assert spec is not None
    if limits:
        spec = spec.model_copy(update={"limits": Limits(**{**spec.limits.model_dump(), **limits})})
    return spec


async def start_run(
    client: Client,
    settings: Settings,
    workspace: Path,
    *,
    spec: AgentSpec | None = None,
    prompt: str = "Review this project.",
    run_id: str | None = None,
    fast_model: bool = False,
    llm_local_below_ms: int = timeouts.LLM_LOCAL_BELOW_MS,
) -> WorkflowHandle[AgentRunWorkflow, RunResult]:
    run_id = run_id or f"run-test-{uuid.uuid4().hex[:10]}"
    return await client.start_workflow(
        AgentRunWorkflow.run,
        RunInput(
            run_id=run_id,
            agent=spec or agent(),
            input=prompt,
            model=settings.model,
            workspace=str(workspace),
            llm_max_attempts=settings.llm_max_attempts,
            fast_model=fast_model,
            llm_local_below_ms=llm_local_below_ms,
        ),
        id=run_id,
        task_queue=settings.task_queue,
    )
