"""The findings ledger: findings a run tree made reach its report and `runs.findings`, once,
whatever the models' last answers say, and a retried activity records nothing twice."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from bench.workspaces import generate_workspace
from keel.activities.run_records import RunRecordActivities
from keel.activities.store.audit import AuditLog
from keel.activities.store.context_store import ContextStore
from keel.activities.store.findings_store import FindingsLedger
from keel.activities.store.interaction_store import InteractionStore
from keel.activities.store.run_store import Store
from keel.activities.store.run_tree import RunTreeStore
from keel.activities.tools.mcp_client import McpClient
from keel.activities.tools.sandbox import Sandbox
from keel.activities.tools.tool_activities import ToolActivities
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Conversation, Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.workflows.run.models import FinishRunInput
from keel.workflows.run.step_models import ToolCallInput
from keel.workflows.usage.models import Usage
from tests.conftest import auth_headers, in_process_worker
from tests.integration.runs import agent, start_run

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
# Small enough that a few reads of 9 KB files make the conversation compact.
WINDOW = 6_000


def call(name: str, **arguments: object) -> ScriptedToolCall:
    return ScriptedToolCall(name=name, arguments=arguments)


def block(*findings: dict[str, object]) -> str:
    return "```findings\n" + json.dumps(list(findings)) + "\n```"


def forgetful_review() -> Script:
    """A review whose sub-agents find things one way or another, and whose parent forgets.

    CHILD-A records its finding with the tool and never mentions it in its answer;
    CHILD-B writes a findings block, one of its findings at a place nobody read; the
    parent records a finding at a place CHILD-B also reported, then ends with a block
    naming only one finding, which CHILD-A had recorded already.
    """
    core_todo = {"file": "pkg/core.py", "line": 2, "severity": "medium", "title": "TODO in add"}
    return Script(
        turns=[
            Turn(
                tool_calls=[
                    call("task", agent="explore", prompt="CHILD-A: read pkg/core.py"),
                    call("task", agent="explore", prompt="CHILD-B: read README.md"),
                ]
            ),
            Turn(
                tool_calls=[
                    call(
                        "report_finding",
                        file="README.md",
                        line=1,
                        severity="high",
                        title="The README says nothing",
                        detail="Say what the package does.",
                    )
                ]
            ),
            Turn(content="## Summary\nA tiny package; all is well.\n\n" + block(core_todo)),
        ],
        conversations=[
            Conversation(
                match="CHILD-A",
                turns=[
                    Turn(tool_calls=[call("read_file", path="pkg/core.py")]),
                    Turn(tool_calls=[call("report_finding", **core_todo)]),
                    Turn(content="## Files read\n- pkg/core.py"),
                ],
            ),
            Conversation(
                match="CHILD-B",
                turns=[
                    Turn(tool_calls=[call("read_file", path="README.md")]),
                    Turn(
                        content="## Files read\n- README.md\n\n"
                        + block(
                            {"file": "README.md", "line": 1, "severity": "low", "title": "Bare"},
                            {"file": "./pkg/__init__.py", "line": 1, "severity": "low",
                             "title": "Docstring only"},
                        )
                    ),
                ],
            ),
        ],
    )  # fmt: skip


async def ledger_rows(store: Store, run_ids: list[str]) -> int:
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) AS n FROM run_findings WHERE run_id = ANY(%s)", (run_ids,)
        )
        row = await cur.fetchone()
    return int(row["n"]) if row else 0


async def test_every_finding_of_the_tree_is_reported_once_though_the_parent_forgets(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(forgetful_review())
    settings = settings_for(llm, workspace, api_port=free_port())
    async with (
        in_process_worker(temporal_client, store, settings),
        serve_api(settings) as url,
        httpx.AsyncClient(base_url=url, headers=auth_headers()) as http,
    ):
        body = {"agent": "review", "input": "Review it", "workspace": str(workspace)}
        run_id = (await http.post("/v1/runs", json=body)).json()["id"]
        run: dict[str, Any] = {}
        for _ in range(600):
            run = (await http.get(f"/v1/runs/{run_id}")).json()
            if run["status"] in ("completed", "failed", "cancelled"):
                break
            await asyncio.sleep(0.1)
        assert run["status"] == "completed", run

    places = {(f["file"], f["line"]): f for f in run["findings"]}
    assert set(places) == {("README.md", 1), ("pkg/core.py", 2), ("pkg/__init__.py", 1)}
    assert len(run["findings"]) == 3  # each once, however many runs reported it
    readme = places[("README.md", 1)]
    assert readme["severity"] == "high" and readme["title"] == "The README says nothing"
    assert readme["reported_by"] == ["explore", "review"] and readme["verified"]
    assert places[("pkg/core.py", 2)]["verified"]
    assert places[("pkg/__init__.py", 1)]["verified"] is False  # nobody read it
    assert run["findings_error"] is None

    report = run["report"]
    assert report.startswith("## Summary\nA tiny package; all is well.")
    assert report.count("```findings") == 1  # the model's block moved into Keel's section
    section = report.split("## Findings recorded by Keel", 1)[1]
    assert "3 findings from this run and its 2 sub-agent runs" in section
    assert "1 cites a place no run read" in section
    for title in ("The README says nothing", "TODO in add", "Docstring only"):
        assert section.count(title) == 1, section

    # The children's own records: each its own findings, however its answer put them.
    root = run_id
    tree = await RunTreeStore(store.pool).subtree("default", root)
    kids = [r.id for r in tree[1:]]
    [child_a] = [r for r in tree if r.input.startswith("CHILD-A")]
    assert child_a.findings is not None
    assert [(f.file, f.line) for f in child_a.findings.findings] == [("pkg/core.py", 2)]
    assert "## Findings recorded by Keel" in (child_a.report or "")

    # A retried finish records nothing again and renders the same report.
    rows = await ledger_rows(store, [root, *kids])
    assert rows == 5  # A's call, B's two, the parent's call and its block's one
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT max(step) AS step FROM messages WHERE run_id = %s AND role = 'assistant'",
            (root,),
        )
        final_step = (await cur.fetchone() or {})["step"]
        cur = await conn.execute(
            "SELECT seq FROM events WHERE run_id = %s AND type = 'done'", (root,)
        )
        done_seq = (await cur.fetchone() or {})["seq"]
    record = await store.get_run(root)
    assert record is not None
    await RunRecordActivities(store).finish_run(
        FinishRunInput(
            run_id=root,
            status="completed",
            stop_reason="final_answer",
            final_step=final_step,
            steps=record.steps,
            tool_calls=record.tool_calls,
            usage=Usage(),
            event_seq=done_seq,
        )
    )
    again = await store.get_run(root)
    assert again is not None and again.report == report
    assert await ledger_rows(store, [root, *kids]) == rows


async def test_a_report_finding_call_retried_after_a_crash_records_its_finding_once(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    """The worker dies after the finding is in the ledger and before the call's answer is
    stored; Temporal runs the activity again, and the ledger still has it once."""
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[call("read_file", path="pkg/core.py")]),
                Turn(content="Done."),
            ]
        )
    )
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace, spec=agent("investigate"))
        await handle.result()
    tools = ToolActivities(
        store,
        InteractionStore(store.pool),
        AuditLog(store.pool),
        workspace.parent,
        mcp=McpClient({}, timeout_s=5),
        sandbox=Sandbox.configured("bwrap"),
    )
    finding = {"file": "pkg/core.py", "line": 2, "severity": "low", "title": "TODO left"}
    tool_call = ToolCallInput(
        run_id=handle.id,
        step=9,
        ord=1,
        call_id="call-9-1",
        name="report_finding",
        arguments=json.dumps(finding),
        workspace=str(workspace),
        event_seq=900,
    )
    env = ActivityEnvironment()
    first = await env.run(tools.run_tool, tool_call)
    assert not first.is_error
    async with store.pool.connection() as conn:  # as if the answer had never been stored
        await conn.execute("DELETE FROM messages WHERE run_id = %s AND step = 9", (handle.id,))
        await conn.execute("DELETE FROM events WHERE run_id = %s AND seq >= 900", (handle.id,))
    again = await env.run(tools.run_tool, tool_call)
    assert not again.is_error
    assert await ledger_rows(store, [handle.id]) == 1
    assert [f.title for f in await FindingsLedger(store.pool).tree(handle.id)] == ["TODO left"]

    missing = tool_call.model_copy(
        update={"step": 10, "arguments": json.dumps({**finding, "file": "nope.py"})}
    )
    refused = await env.run(tools.run_tool, missing)
    assert refused.is_error and await ledger_rows(store, [handle.id]) == 1


async def test_a_findings_block_written_mid_run_outlives_a_compaction_and_the_answer(
    temporal_client: Client,
    store: Store,
    scripted: StartLLM,
    settings_for: MakeSettings,
    tmp_path: Path,
) -> None:
    """The model writes a block beside a tool call early on, the conversation is
    compacted past it (the summary does not carry it), and the final answer has no block:
    the finding is in `runs.findings` and the report all the same, recorded once."""
    ws = generate_workspace(tmp_path / "ws", total_bytes=90_000)
    early = ws.files[0]
    mid_run = {"file": early, "line": 3, "severity": "medium", "title": "Unused import of os"}
    reads = [Turn(tool_calls=[call("read_file", path=p)]) for p in ws.files[1:]]
    llm = scripted(
        Script(
            context_window=WINDOW,
            turns=[
                Turn(tool_calls=[call("read_file", path=early)]),
                Turn(content="Noted.\n\n" + block(mid_run), tool_calls=reads[0].tool_calls),
                *reads[1:],
                Turn(content="## Summary\nThe handlers look alike."),
            ],
        )
    )  # fmt: skip
    settings = settings_for(llm, tmp_path, model_context_window=WINDOW)
    spec = agent("review", max_steps=100).model_copy(update={"subagents": []})
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, ws.root, spec=spec)
        result = await handle.result()
    assert result.status == "completed", result.error
    assert result.stop_reason == "final_answer"

    # The step that wrote the block was compacted away, and its summary does not name it.
    events = await store.list_events(result.run_id, limit=5000)
    compactions = [e.data for e in events if e.type == "compaction"]
    assert compactions and int(str(compactions[-1]["through_step"])) >= 2
    inputs = await ContextStore(store.pool).budget_inputs(result.run_id, settings.model)
    assert inputs.summary is not None and "Unused import" not in inputs.summary.content
    # The request the final answer was written from does not hold it either.
    final = llm.last_request(len(ws.files))
    assert "Unused import" not in json.dumps(final["messages"])

    run = await store.get_run(result.run_id)
    assert run is not None and run.report is not None and run.findings is not None
    assert [(f.file, f.line, f.title) for f in run.findings.findings] == [
        (early, 3, "Unused import of os")
    ]
    assert run.report.startswith("## Summary\nThe handlers look alike.")
    section = run.report.split("## Findings recorded by Keel", 1)[1]
    assert section.count("Unused import of os") == 1
    assert await ledger_rows(store, [result.run_id]) == 1

    # The step stored again (a retried LLM call) records nothing twice.
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT content, tool_calls FROM messages WHERE run_id = %s AND step = 2"
            " AND role = 'assistant'",
            (result.run_id,),
        )
        row = await cur.fetchone()
    assert row is not None and "Unused import of os" in row["content"]
    await store.record_assistant(
        run_id=result.run_id,
        step=2,
        content=row["content"],
        tool_calls=row["tool_calls"],
        model=settings.model,
        prompt_tokens=1,
        completion_tokens=1,
        latency_ms=1,
        attempt=2,
        finish_reason="tool_calls",
        event_seq=100_000,
    )
    assert await ledger_rows(store, [result.run_id]) == 1
