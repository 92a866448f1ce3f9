"""A step's writes in one statement per activity, and a read retried after its answer.

- A run of several reads records every message, both events of each call and of each
  model call, the usage, and a file view of every line read, though each request now
  records only the views it newly shows.
- A read retried after its answer was stored (a worker that died before the result
  reached the workflow) runs again without asking the store first; the stored answer
  stays, no event is written twice, and the digest is the stored answer's, not the
  retry's (which here would fail: the file is gone).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from keel.activities.store.audit import AuditLog
from keel.activities.store.interaction_store import InteractionStore
from keel.activities.store.run_store import Store
from keel.activities.tools.mcp_client import McpClient
from keel.activities.tools.sandbox import Sandbox
from keel.activities.tools.tool_activities import ToolActivities
from keel.worker.config.settings import Settings
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.workflows.run.models import RunResult
from keel.workflows.run.step_models import ToolCallInput
from tests.conftest import in_process_worker
from tests.integration.runs import agent, start_run

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
READS = 4
COUNTS_SQL = (
    "SELECT (SELECT count(*) FROM messages WHERE run_id = %(run)s AND role = 'tool') AS tools,"
    " (SELECT count(*) FROM events WHERE run_id = %(run)s) AS events,"
    " (SELECT count(*) FROM events WHERE run_id = %(run)s AND type = 'usage') AS usages,"
    " (SELECT count(*) FROM llm_calls WHERE run_id = %(run)s) AS calls,"
    " (SELECT steps FROM runs WHERE id = %(run)s) AS steps"
)
VIEWS_SQL = (
    "SELECT first_line FROM file_views WHERE run_id = %s AND path = 'pkg/core.py'"
    " ORDER BY first_line"
)


def read_line(line: int) -> ScriptedToolCall:
    return ScriptedToolCall(
        name="read_file", arguments={"path": "pkg/core.py", "start_line": line, "end_line": line}
    )


async def counts(store: Store, run_id: str) -> dict[str, int]:
    async with store.pool.connection() as conn:
        cur = await conn.execute(COUNTS_SQL, {"run": run_id})
        row = await cur.fetchone()
    assert row is not None
    return dict(row)


async def test_a_runs_writes_and_a_retried_read_keep_one_answer(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    turns = [Turn(tool_calls=[read_line(line)]) for line in range(1, READS)]
    llm = scripted(Script(turns=[*turns, Turn(content="Read them.")]))
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace, spec=agent("review"))
        result: RunResult = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.status == "completed" and result.tool_calls == READS - 1
    before = await counts(store, handle.id)
    assert before["tools"] == READS - 1 and before["calls"] == READS == before["usages"]
    assert before["steps"] == READS
    async with store.pool.connection() as conn:
        cur = await conn.execute(VIEWS_SQL, (handle.id,))
        viewed = [row["first_line"] for row in await cur.fetchall()]
    assert viewed == list(range(1, READS))  # every line read, each recorded once

    stored = await store.get_message(handle.id, 1, 2)
    assert stored is not None and not stored.is_error and "add" in (stored.content or "")
    (workspace / "pkg" / "core.py").unlink()  # a retry now would answer with an error
    tools = ToolActivities(
        store,
        InteractionStore(store.pool),
        AuditLog(store.pool),
        workspace.parent,
        mcp=McpClient({}, timeout_s=5),
        sandbox=Sandbox.configured("off"),
    )
    retried = ToolCallInput(
        run_id=handle.id,
        step=1,
        ord=2,
        call_id=stored.tool_call_id or "",
        name="read_file",
        arguments='{"path":"pkg/core.py","start_line":1,"end_line":1}',
        workspace=str(workspace),
        event_seq=3,  # the seqs the first attempt wrote its two events at
    )
    digest = await ActivityEnvironment().run(tools.run_tool, retried)
    assert not digest.is_error  # the stored answer's flag, not the failed retry's
    again = await store.get_message(handle.id, 1, 2)
    assert again is not None and again.content == stored.content
    assert await counts(store, handle.id) == before
