"""An edit meets the agent's `tool.before` hooks, as the model's call did."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from keel.activities.store.run_store import Store
from keel.worker.config.settings import Settings
from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn
from keel.workflows.interactions.models import InteractionDecision
from keel.workflows.run.agent_run import AgentRunWorkflow
from tests.conftest import in_process_worker
from tests.integration.runs import start_run
from tests.integration.test_mcp_tools import call, pending, tool_messages
from tests.integration.test_plugins import agent, installed
from tests.integration.test_replay import HISTORIES, replayer

__all__ = ["installed"]  # the fixture, used by name

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]


async def test_an_edit_a_before_hook_denies_is_refused_and_another_edit_runs(
    installed: Path,
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    # The asker hook makes every listing ask; the example's no_env_files denies `.env`.
    llm = scripted(
        Script(turns=[Turn(tool_calls=[call("list_files", pattern="*.md")]), Turn(content="Ok.")])
    )
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace, spec=agent("build"))
        asked = await pending(handle)

        def edit(arguments: dict[str, str]) -> InteractionDecision:
            return InteractionDecision(
                interaction_id=asked.id,
                decision="approve",
                approver="anonymous",
                payload_hash=asked.payload_hash,
                arguments=json.dumps(arguments),
            )

        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(
                AgentRunWorkflow.decide, edit({"path": ".env", "pattern": "*"})
            )
        cause = refused.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "EditRefused"
        assert "refused by the hook example/no_env_files" in cause.message
        assert ".env files hold secrets" in cause.message
        [still] = await handle.query(AgentRunWorkflow.list_interactions)
        assert still.status == "pending"

        outcome = await handle.execute_update(
            AgentRunWorkflow.decide, edit({"path": ".", "pattern": "*.py"})
        )
        assert outcome.status == "approved" and outcome.approved_hash is not None
        result = await handle.result()
        history = await handle.fetch_history()
    assert (await replayer().replay_workflow(history)).replay_failure is None
    if os.environ.get("KEEL_RECORD_HISTORY"):
        # KEEL_RECORD_HISTORY=1: keep this run's history (hooks judged an edit) for test_replay.
        target = HISTORIES / "agent_run_edited_approval_hooks.json"
        target.write_text(json.dumps(history.to_json_dict(), indent=1))

    assert result.status == "completed"
    [told] = tool_messages(llm, 1)
    assert told.startswith("Note: anonymous approved this list_files call with changes")
    assert '"*.md" -> "*.py"' in told
