"""The agent on Keel: `AgentRunWorkflow` through Keel's real worker, Store and Postgres.

    .venv/bin/python -m bench.peers.keel --temporal HOST:PORT --llm-url URL [--steps 20 ...]

Keel's tools are a fixed set and `bump` is not one of them, so Keel's side of
the comparison is its closest one-tool step: an agent whose only tool is
`read_file`, reading one distinct line of a small file per step (a read-only
tool, like `bump`). The run's transcript goes to a scratch database on the
Postgres of DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/postgres),
dropped at the end.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

from bench.peers.agent import (
    API_KEY,
    INSTRUCTIONS,
    KEEL_READ_PATH,
    MODEL,
    PROMPT,
    expected_answer,
    max_turns,
)
from bench.peers.measure import Peer, PeerArgs, PeerError, WorkflowRef, check_answer, serve
from bench.step_overhead import DEFAULT_ADMIN_URL, fresh_database
from keel.activities.store.run_store import Store
from keel.api.core.run_orders import as_started
from keel.worker.agent_catalog import AgentCatalog
from keel.worker.config.settings import Settings, settings_from
from keel.worker.runtime import build_worker
from keel.worker.temporal_client import connect
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.agent_spec import AgentSpec, Limits
from keel.workflows.run.models import RunInput

BASE_AGENT = "review"
TOOL = "read_file"


def one_tool_agent(steps: int) -> AgentSpec:
    """The built-in review agent cut down to `read_file` and the shared instructions."""
    spec = AgentCatalog.load().get(BASE_AGENT)
    if spec is None:
        raise PeerError(f"The built-in `{BASE_AGENT}` agent is missing; reinstall Keel.")
    limits = Limits(
        **{
            **spec.limits.model_dump(),
            "max_steps": max_turns(steps),
            "max_tool_calls": 100_000,
            "max_stale_rounds": 1000,
        }
    )
    # Without sub-agents, like the peers: one tool, one conversation.
    return spec.model_copy(
        update={
            "system_prompt": INSTRUCTIONS,
            "tools": [TOOL],
            "limits": limits,
            "subagents": [],
            # The peers leave reading to the model: so does this run.
            "coverage": "model",
        }
    )


def notes_workspace(root: Path, lines: int) -> Path:
    root.mkdir(parents=True)
    text = "".join(f"line {i}: nothing to see here\n" for i in range(1, lines + 1))
    (root / KEEL_READ_PATH).write_text(text)
    return root


@asynccontextmanager
async def keel_peer(args: PeerArgs) -> AsyncIterator[Peer]:
    admin_url = Settings().database_url or DEFAULT_ADMIN_URL
    with tempfile.TemporaryDirectory(prefix="keel-peers-") as tmp:
        root = Path(tmp)
        workspace = notes_workspace(root / "project", args.steps)
        async with fresh_database(admin_url) as database_url:
            store = await Store.open(database_url, max_size=Settings().database_pool_size)
            try:
                await store.migrate()
                settings = settings_from(
                    temporal_address=args.temporal_address,
                    database_url=database_url,
                    openai_base_url=args.llm_url,
                    openai_api_key=API_KEY,
                    model=MODEL,
                    task_queue=f"peers-keel-{uuid.uuid4().hex[:8]}",
                    data_dir=root / "data",
                    workspace_root=root,
                )
                client = await connect(args.temporal_address)
                spec = one_tool_agent(args.steps)

                async def run_once() -> WorkflowRef | None:
                    run_id = f"run-peers-{uuid.uuid4().hex[:12]}"
                    # As the API starts a run: the prompt and input stored, not in history.
                    run = RunInput(
                        run_id=run_id,
                        agent=spec,
                        input=PROMPT,
                        model=settings.model,
                        workspace=str(workspace),
                        llm_max_attempts=settings.llm_max_attempts,
                    )
                    handle = await client.start_workflow(
                        AgentRunWorkflow.run,
                        await as_started(store, run),
                        id=run_id,
                        task_queue=settings.task_queue,
                        execution_timeout=timedelta(seconds=args.timeout_s),
                    )
                    result = await handle.result()
                    if result.status != "completed" or result.tool_calls != args.steps:
                        raise PeerError(
                            f"The Keel run ended {result.status}/{result.stop_reason} after "
                            f"{result.tool_calls} tool calls (expected {args.steps}); "
                            f"error: {result.error}."
                        )
                    return WorkflowRef(run_id, handle.first_execution_run_id)

                async def verify(ref: WorkflowRef) -> None:
                    messages = await store.conversation(ref.workflow_id, None)
                    failed = [m.content for m in messages if m.is_error]
                    if failed:
                        raise PeerError(f"A {TOOL} call of the Keel run failed: {failed[0]}")
                    check_answer(messages[-1].content, expected_answer(args.steps))

                parts = build_worker(client, store, settings)
                try:
                    async with parts.worker:
                        yield Peer(run_once=run_once, client=client, verify=verify)
                finally:
                    await parts.llm.close()
            finally:
                await store.close()


if __name__ == "__main__":
    serve("bench.peers.keel", keel_peer)
