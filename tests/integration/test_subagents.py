"""Sub-agents: `task` calls run child runs on the real dev server, Postgres and `openai`."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError

from keel.activities.store.run_store import Store
from keel.activities.store.run_tree import RunTreeStore
from keel.api.core.tenant_ids import scoped
from keel.worker.config.settings import Settings
from keel.worker.scripted.llm import Conversation, Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.workflows import timeouts
from keel.workflows.gate.permissions import PermissionRule
from keel.workflows.interactions.models import Interaction, InteractionDecision
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.agent_spec import AgentSpec
from tests.conftest import JWT_SECRET, in_process_worker
from tests.integration.keel_http import LaunchKeel, base_url, settings_of
from tests.integration.runs import agent, start_run
from tests.integration.test_approvals import (
    ALICE,
    BOB,
    MALLORY,
    decide,
    executions,
    finished,
    pending,
)
from tests.integration.test_cli import clean_env, keel
from tests.integration.test_durability import (  # noqa: F401 (spawn_worker is a fixture)
    HISTORY_BYTES_PER_STEP_BUDGET,
    spawn_worker,
    wait_until,
)
from tests.integration.test_event_stream import bare_run
from tests.integration.test_replay import HISTORIES, replayer

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]


def task(agent_name: str, prompt: str) -> ScriptedToolCall:
    return ScriptedToolCall(name="task", arguments={"agent": agent_name, "prompt": prompt})


def read(path: str) -> ScriptedToolCall:
    return ScriptedToolCall(name="read_file", arguments={"path": path})


def delegating(name: str = "investigate", **limits: int) -> AgentSpec:
    """A built-in agent that may run `explore` sub-agents."""
    return agent(name, **limits).model_copy(update={"subagents": ["explore"]})


def child(match: str, path: str, answer: str, delay_s: float = 0.0) -> Conversation:
    """A sub-agent that reads one file and answers."""
    return Conversation(
        match=match,
        turns=[Turn(tool_calls=[read(path)], delay_s=delay_s), Turn(content=answer)],
    )


async def test_parallel_children_complete_and_their_answers_reach_the_parent(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        task("explore", "CHILD-A: what does pkg/core.py define?"),
                        task("explore", "CHILD-B: what is in README.md?"),
                        task("nobody", "not a sub-agent"),
                    ]
                ),
                Turn(content="Merged the findings of {tool_results} calls."),
            ],
            conversations=[
                child("CHILD-A", "pkg/core.py", "- pkg/core.py:1 defines add()", delay_s=1.0),
                child("CHILD-B", "README.md", "- README.md:1 is a title", delay_s=1.0),
            ],
        )
    )
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace, spec=delegating())
        result = await asyncio.wait_for(handle.result(), timeout=120)

    assert result.status == "completed" and result.stop_reason == "final_answer"
    assert llm.requests_of("CHILD-A") == {0: 1, 1: 1}
    assert llm.requests_of("CHILD-B") == {0: 1, 1: 1}

    tree = await RunTreeStore(store.pool).subtree("default", handle.id)
    children = sorted(tree[1:], key=lambda r: r.id)
    assert tree[0].id == handle.id
    assert [r.id for r in children] == [f"{handle.id}-task-1-2", f"{handle.id}-task-1-3"]
    for run in children:
        assert run.parent_run_id == handle.id and run.trigger == "parent"
        assert run.tenant_id == "default" and run.requester == "anonymous"
        assert run.status == "completed" and run.agent == "explore"
    assert children[0].input == "CHILD-A: what does pkg/core.py define?"
    # They ran at the same time: each started before the other finished.
    a, b = children
    assert a.started_at and b.started_at and a.finished_at and b.finished_at
    assert a.started_at < b.finished_at and b.started_at < a.finished_at

    tools = [m for m in await store.conversation(handle.id, None) if m.role == "tool"]
    assert [t.content for t in tools[:2]] == [
        "- pkg/core.py:1 defines add()",
        "- README.md:1 is a title",
    ]
    assert not tools[0].is_error and not tools[1].is_error
    assert tools[2].is_error and "not a sub-agent this agent may run" in (tools[2].content or "")
    assert "Choose one of: explore" in (tools[2].content or "")

    # The child saw only the prompt its parent wrote, after its own system prompt.
    first = await store.conversation(children[0].id, None)
    assert [m.role for m in first[:2]] == ["system", "user"]
    assert first[1].content == "CHILD-A: what does pkg/core.py define?"

    # Usage rolls up: the parent's result counts its own calls and its children's.
    parent = tree[0]
    own = parent.prompt_tokens + parent.completion_tokens
    theirs = sum(r.prompt_tokens + r.completion_tokens for r in children)
    assert theirs > 0 and result.usage.total_tokens == own + theirs

    events = await store.list_events(handle.id)
    child_events = [e.data for e in events if e.type == "child_run"]
    statuses = [(e["run_id"], e["status"]) for e in child_events]
    # In the order they started and finished.
    assert sorted(statuses[:2]) == [(a.id, "running"), (b.id, "running")]
    assert sorted(statuses[2:]) == [(a.id, "completed"), (b.id, "completed")]
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1))


LEAD = """---
name: lead
description: Hands changes to the build agent.
tools: [list_files, read_file]
subagents: [build]
---
You lead a change: hand it to the build agent with `task`, then report what it did.
"""


def build_child() -> Conversation:
    return Conversation(
        match="CHILD-BUILD",
        turns=[
            Turn(tool_calls=[write("notes/out.txt", "hello")]),
            Turn(content="Wrote notes/out.txt."),
        ],
    )


def write(path: str, content: str) -> ScriptedToolCall:
    return ScriptedToolCall(name="write_file", arguments={"path": path, "content": content})


@pytest.mark.parametrize("held_elsewhere", [False, True], ids=["own-id", "id-another-tenant-holds"])
async def test_a_childs_approval_is_decided_through_the_parent_and_runs_once(
    store: Store,
    workspace: Path,
    tmp_path: Path,
    database_url: str,
    scripted: StartLLM,
    held_elsewhere: bool,
    keel_app: LaunchKeel,
) -> None:
    """Also with a run id another tenant holds (issue 21, #18): the run is kept under a
    scoped key, and its children, their interactions and events show the ids as chosen."""
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "lead.md").write_text(LEAD)
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[task("build", "CHILD-BUILD: write notes/out.txt saying hello")]),
                Turn(content="The build agent reported back."),
            ],
            conversations=[build_child()],
        )
    )
    async with keel_app(llm, headers={}, http_timeout=30, agents_dir=agents) as http:
        chosen = f"lead-{uuid.uuid4().hex[:8]}"
        if held_elsewhere:
            await bare_run(store, workspace, "held", tenant_id="other-tenant", run_id=chosen)
        created = await http.post(
            "/v1/runs",
            headers=ALICE,
            json={
                "agent": "lead",
                "input": "Add the notes.",
                "workspace": str(workspace),
                "run_id": chosen,
            },
        )
        assert created.status_code == 201, created.text
        parent = created.json()["id"]
        assert parent == chosen
        child_id = f"{parent}-task-1-2"
        key = scoped("default", parent) if held_elsewhere else parent
        [ia] = await pending(http, parent)
        assert ia["run_id"] == child_id and ia["id"] == f"{child_id}:ia-1-2"
        assert ia["tool"] == "write_file" and ia["approvers"] == ["user:alice"]
        seen = await http.get(f"/v1/runs/{parent}/interactions/{ia['id']}", headers=ALICE)
        assert seen.status_code == 200 and seen.json()["run_id"] == child_id
        view = (await http.get(f"/v1/runs/{parent}", headers=ALICE)).json()
        assert view["pending_interactions"] == [ia["id"]]
        assert [c["id"] for c in view["children"]] == [child_id]

        # The checks are the child's own: another user may not, another tenant sees nothing.
        assert (await decide(http, parent, ia, headers=BOB)).status_code == 403
        assert (await decide(http, parent, ia, headers=MALLORY)).status_code == 404
        assert (await decide(http, parent, ia, payload_hash="0" * 64)).status_code == 422
        assert not (workspace / "notes" / "out.txt").exists()
        accepted = await decide(http, parent, ia)
        assert accepted.status_code == 200, accepted.text
        assert accepted.json()["interaction"]["run_id"] == child_id
        # Through the child's own endpoint: the same decision again is idempotent, another
        # one is too late.
        assert (await decide(http, child_id, ia)).status_code == 200
        assert (await decide(http, child_id, ia, decision="reject")).status_code == 409

        run = await finished(http, parent)
        assert run["status"] == "completed", run
        assert run["report"] == "The build agent reported back."
        [node] = run["children"]
        assert node["id"] == child_id and node["agent"] == "build"
        assert node["status"] == "completed" and node["tool_calls"] == 1
        own, total = run["usage"], run["total_usage"]
        assert total["total_tokens"] == own["total_tokens"] + node["usage"]["total_tokens"]
        events = (await http.get(f"/v1/runs/{parent}/events", headers=ALICE)).json()["events"]
        statuses = [e["data"]["status"] for e in events if e["type"] == "child_run"]
        assert statuses == ["running", "waiting", "running", "completed"]
        waiting = next(
            e for e in events if e["type"] == "child_run" and e["data"]["status"] == "waiting"
        )
        assert waiting["data"]["pending_interactions"] == [ia["id"]]
    assert (workspace / "notes" / "out.txt").read_text() == "hello"
    assert await executions(database_url, f"{key}-task-1-2") == 1
    tools = [m for m in await store.conversation(key, None) if m.role == "tool"]
    assert [t.content for t in tools] == ["Wrote notes/out.txt."]


async def test_cancelling_the_parent_cancels_its_children(
    temporal_client: Client, workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        task("explore", "CHILD-A: look at pkg/core.py"),
                        task("explore", "CHILD-B: look at README.md"),
                    ]
                ),
                Turn(content="never reached"),
            ],
            conversations=[
                child("CHILD-A", "pkg/core.py", "a", delay_s=60.0),
                child("CHILD-B", "README.md", "b", delay_s=60.0),
            ],
        )
    )
    async with keel_app(llm, headers={}, http_timeout=30) as http:
        handle = await start_run(temporal_client, settings_of(http), workspace, spec=delegating())
        await wait_until(lambda: llm.requests_of("CHILD-A")[0] + llm.requests_of("CHILD-B")[0] == 2)
        cancelled = await http.post(f"/v1/runs/{handle.id}/cancel", headers=ALICE)
        assert cancelled.status_code == 200, cancelled.text
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), timeout=60)
        run = await finished(http, handle.id)
        assert run["status"] == "cancelled"
        assert sorted(c["status"] for c in run["children"]) == ["cancelled", "cancelled"]
    for node in run["children"]:
        described = await temporal_client.get_workflow_handle(node["id"]).describe()
        assert described.status == WorkflowExecutionStatus.CANCELED
    assert llm.requests_of("")[1] == 0  # the parent never asked its model again


@pytest.mark.durability
async def test_sigkilled_worker_while_children_run_and_every_run_completes_once(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    spawn_worker: Callable[[Settings], subprocess.Popen[bytes]],  # noqa: F811
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        task("explore", "CHILD-A: look at pkg/core.py"),
                        task("explore", "CHILD-B: look at README.md"),
                    ]
                ),
                Turn(content="Merged {tool_results} answers."),
            ],
            conversations=[
                Conversation(
                    match="CHILD-A",
                    turns=[
                        Turn(tool_calls=[read("pkg/core.py")]),
                        Turn(content="- pkg/core.py:1 add()", delay_s=3.0),
                    ],
                ),
                Conversation(
                    match="CHILD-B",
                    turns=[
                        Turn(tool_calls=[read("README.md")]),
                        Turn(content="- README.md:1 title", delay_s=3.0),
                    ],
                ),
            ],
        )
    )
    settings = settings_for(llm, workspace)
    first = spawn_worker(settings)
    handle = await start_run(temporal_client, settings, workspace, spec=delegating())
    # Both children are in their last model call when the worker dies.
    await wait_until(
        lambda: llm.requests_of("CHILD-A")[1] >= 1 and llm.requests_of("CHILD-B")[1] >= 1
    )
    first.send_signal(signal.SIGKILL)
    first.wait()
    spawn_worker(settings)
    result = await asyncio.wait_for(handle.result(), timeout=180)

    assert result.status == "completed" and result.steps == 2
    children = sorted(
        (await RunTreeStore(store.pool).subtree("default", handle.id))[1:], key=lambda r: r.id
    )
    assert [c.status for c in children] == ["completed", "completed"]
    for node in children:
        runs = [w async for w in temporal_client.list_workflows(f'WorkflowId = "{node.id}"')]
        assert len(runs) == 1, f"{node.id} started {len(runs)} times"
        assert node.steps == 2 and node.tool_calls == 1
    for match in ("CHILD-A", "CHILD-B"):
        assert llm.requests_of(match)[0] == 1  # finished steps are not asked again
    assert llm.requests_of("")[0] == 1 and llm.requests_of("")[1] == 1
    tools = [m for m in await store.conversation(handle.id, None) if m.role == "tool"]
    assert [t.content for t in tools] == ["- pkg/core.py:1 add()", "- README.md:1 title"]
    run = await store.get_run(handle.id)
    assert run is not None and run.report == "Merged 2 answers."


# What a step that runs one sub-agent may add to its parent's history. Temporal's own
# records of a child (its start, started and completed events, and the workflow task
# the child's start wakes) are about 1.1 KB of it; the child's work is in its own history.
HISTORY_BYTES_PER_SUBAGENT_STEP_BUDGET = 2 * HISTORY_BYTES_PER_STEP_BUDGET


async def delegating_run(
    client: Client, store: Store, settings: Settings, workspace: Path, steps: int
) -> tuple[int, int]:
    """A parent that runs one sub-agent a step: its steps and history bytes."""
    spec = delegating(max_steps=steps + 5, max_stale_rounds=steps + 5)
    handle = await start_run(client, settings, workspace, spec=spec)
    result = await asyncio.wait_for(handle.result(), timeout=300)
    assert result.status == "completed" and result.steps == steps + 1
    history = await handle.fetch_history()
    return result.steps, sum(event.ByteSize() for event in history.events)


async def test_a_parents_history_per_step_stays_in_budget_with_children(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    def script(steps: int, reads: int) -> Script:
        def child_turns(i: int) -> list[Turn]:
            work = [Turn(tool_calls=[read("pkg/core.py")]) for _ in range(reads)]
            return [*work, Turn(content=f"- part {i} is fine")]

        return Script(
            turns=[
                *(
                    Turn(tool_calls=[task("explore", f"CHILD-{i:02}: look at part {i}")])
                    for i in range(steps)
                ),
                Turn(content="done"),
            ],
            conversations=[
                Conversation(match=f"CHILD-{i:02}", turns=child_turns(i)) for i in range(steps)
            ],
        )

    sizes: list[tuple[int, int]] = []
    for steps, reads in ((2, 0), (12, 0), (12, 3)):
        settings = settings_for(scripted(script(steps, reads)), workspace)
        async with in_process_worker(temporal_client, store, settings):
            sizes.append(await delegating_run(temporal_client, store, settings, workspace, steps))
    (short_steps, short_size), (long_steps, long_size), (_, busy_size) = sizes
    per_step = (long_size - short_size) / (long_steps - short_steps)
    print(f"parent history: {per_step:.0f} B a step with a sub-agent")
    assert per_step <= HISTORY_BYTES_PER_SUBAGENT_STEP_BUDGET, f"{per_step:.0f} B a step"
    # Children that work more cost their parent nothing more (a few digits of usage aside).
    assert abs(busy_size - long_size) <= 8 * long_steps, (busy_size, long_size)


async def test_histories_of_a_parent_and_its_waiting_child_replay(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        task("build", "CHILD-BUILD: write notes/out.txt saying hello"),
                        task("explore", "CHILD-A: what does pkg/core.py define?"),
                    ]
                ),
                Turn(content="Both sub-agents reported."),
            ],
            conversations=[
                build_child(),
                child("CHILD-A", "pkg/core.py", "- pkg/core.py:1 defines add()"),
            ],
        )
    )
    settings = settings_for(llm, workspace)
    spec = delegating().model_copy(update={"subagents": ["build", "explore"]})
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace, spec=spec)
        builder = temporal_client.get_workflow_handle(f"{handle.id}-task-1-2")

        async def waiting() -> list[Interaction]:
            while True:
                progress = await handle.query(AgentRunWorkflow.progress)
                if progress.pending_interactions:
                    return await builder.query(AgentRunWorkflow.list_interactions)
                await asyncio.sleep(0.05)

        [ia] = await asyncio.wait_for(waiting(), timeout=60)
        await builder.execute_update(
            AgentRunWorkflow.decide,
            InteractionDecision(
                interaction_id=ia.id,
                decision="approve",
                approver="anonymous",
                payload_hash=ia.payload_hash,
            ),
        )
        result = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.status == "completed"
    histories = {"parent": await handle.fetch_history(), "child": await builder.fetch_history()}
    kinds = [e.WhichOneof("attributes") for e in histories["parent"].events]
    assert "workflow_execution_signaled_event_attributes" in kinds  # the child's notices
    for name, history in histories.items():
        assert (await replayer().replay_workflow(history)).replay_failure is None, name
        if os.environ.get("KEEL_RECORD_HISTORY"):
            # KEEL_RECORD_HISTORY=name adds these to the histories future code must replay.
            target = HISTORIES / f"{os.environ['KEEL_RECORD_HISTORY']}_subagents_{name}.json"
            target.write_text(json.dumps(history.to_json_dict(), indent=1))


async def test_continue_as_new_carries_the_sub_agent_state(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads = [
        Turn(tool_calls=[read(path)]) for path in ("pkg/core.py", "README.md", "pkg/__init__.py")
    ]
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[task("explore", "CHILD-A: read three files")]),
                Turn(tool_calls=[task("explore", "CHILD-B: read three files")]),
                Turn(content="Both parts are in."),
            ],
            conversations=[
                Conversation(match="CHILD-A", turns=[*reads, Turn(content="A: three files")]),
                Conversation(match="CHILD-B", turns=[*reads, Turn(content="B: three files")]),
            ],
        )
    )
    # Every step's history is long enough to continue as new (outside the sandbox, which
    # would import its own copy of the limit).
    monkeypatch.setattr(timeouts, "MAX_HISTORY_EVENTS", 5)
    settings = settings_for(llm, workspace, workflow_sandbox=False)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(
            temporal_client, settings, workspace, spec=delegating(max_tool_calls=7)
        )
        result = await asyncio.wait_for(handle.result(), timeout=120)

    executions = [w async for w in temporal_client.list_workflows(f'WorkflowId = "{handle.id}"')]
    assert len(executions) == 3  # continued as new after each step with a child
    assert result.status == "completed" and result.steps == 3
    tree = await RunTreeStore(store.pool).subtree("default", handle.id)
    first, second = sorted(tree[1:], key=lambda r: r.id)
    assert (first.stop_reason, first.tool_calls) == ("final_answer", 3)
    # The second child's share knew of the first child's calls from before the restart:
    # 7 - 1 (the parent's) - 3 (the first child's) - 1 = 2, not 5.
    assert (second.stop_reason, second.tool_calls) == ("max_tool_calls", 2)
    own = sum(r.prompt_tokens + r.completion_tokens for r in tree[:1])
    assert result.usage.total_tokens == own + sum(
        r.prompt_tokens + r.completion_tokens for r in (first, second)
    )


def delegating_review() -> Script:
    """A review that lists the workspace and hands two parts to `explore` sub-agents."""
    return Script(
        turns=[
            Turn(tool_calls=[ScriptedToolCall(name="list_files", arguments={})]),
            Turn(
                tool_calls=[
                    task("explore", "CHILD-A: read pkg/core.py and pkg/__init__.py"),
                    task("explore", "CHILD-B: read README.md"),
                ]
            ),
            Turn(content="## Files reviewed\n- pkg/core.py\n- README.md\n"),
        ],
        conversations=[
            child("CHILD-A", "pkg/core.py", "- pkg/core.py:2 TODO"),
            child("CHILD-B", "README.md", "- README.md:1 title"),
        ],
    )


async def test_keel_review_delegates_and_runs_show_prints_the_tree(
    workspace: Path, tmp_path: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    llm = scripted(delegating_review())
    async with keel_app(llm) as http:
        url = base_url(http)
        env = clean_env(
            KEEL_API_URL=url, KEEL_DATA_DIR=str(tmp_path / "cli"), KEEL_JWT_SECRET=JWT_SECRET
        )
        code, out = await keel("review", str(workspace), env=env)
        assert code == 0, out
        found = re.search(r"Run (run-\w+)", out)
        assert found is not None
        run_id = found.group(1)
        code, shown = await keel("runs", "show", run_id, env=env)
        assert code == 0, shown
        code, raw = await keel("runs", "show", run_id, "--json", env=env)
    assert code == 0, raw
    for ord_ in (2, 3):
        line = next(x for x in shown.splitlines() if f"{run_id}-task-2-{ord_}" in x)
        assert "explore" in line and "completed" in line and "tokens" in line
    # The parent's three calls and each child's two, of 120 tokens each.
    assert "total with sub-agents: 840 tokens" in shown
    # A view for people first: no JSON dump, and the count agrees with the tree.
    assert not shown.lstrip().startswith("{") and '"child_count"' not in shown, shown
    assert shown.lstrip().startswith(f"Run {run_id}  review  completed"), shown
    assert "Sub-agent runs: 2 started directly, 2 in all" in shown, shown
    assert "task" in shown and "Review this codebase" in shown, shown
    # --json is the API's answer, whole: the same count, the children, the report.
    answered = json.loads(raw)
    assert answered["child_count"] == 2 and len(answered["children"]) == 2, answered
    assert answered["report"].startswith("## Files reviewed"), answered


def large_workspace(root: Path, dirs: int = 12, files: int = 10, size: int = 5_000) -> set[str]:
    """A generated project of `dirs` times `files` modules; every third has a `# BUG:` line."""
    bugs: set[str] = set()
    for d in range(dirs):
        for f in range(files):
            path = root / f"pkg{d:02}" / f"mod{f:02}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            lines = [f'"""Module {d}.{f}."""', ""]
            if (d * files + f) % 3 == 0:
                lines.append(f"LIMIT = {f}  # BUG: limit {d}.{f} is off by one")
                bugs.add(f"{path.relative_to(root)}:3")
            body = "\n".join(f"def fn_{i}(x):\n    return x + {i}\n" for i in range(size // 40))
            path.write_text("\n".join(lines) + "\n" + body[:size] + "\n")
    return bugs


async def test_review_of_a_large_workspace_delegates_and_covers_its_files(
    temporal_client: Client,
    store: Store,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    root = tmp_path / "large"
    bugs = large_workspace(root)
    files = {str(p.relative_to(root)) for p in root.rglob("*.py")}
    llm = scripted(Script(policy="reviewer"))
    settings = settings_for(llm, root)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, root, spec=agent("review"))
        result = await asyncio.wait_for(handle.result(), timeout=600)

    assert result.status == "completed" and result.stop_reason == "final_answer"
    children = (await RunTreeStore(store.pool).subtree("default", handle.id))[1:]
    assert len(children) >= 8 and {c.status for c in children} == {"completed"}
    run = await store.get_run(handle.id)
    assert run is not None and run.report is not None
    reviewed = run.report.split("## Files reviewed", 1)[1].split("##", 1)[0]
    covered = set(re.findall(r"^- (\S+)$", reviewed, re.MULTILINE))
    assert len(covered & files) >= 0.9 * len(files), f"{len(covered)} of {len(files)}"
    findings = run.report.split("## Findings", 1)[1]
    assert {b for b in bugs if f"- {b}:" in findings} == bugs
    # The lead never read the files itself: the parts went to sub-agents.
    lead_reads = [
        m
        for m in await store.conversation(handle.id, None)
        if m.role == "tool" and m.name == "read_file"
    ]
    assert lead_reads == []


async def test_a_rule_can_make_starting_a_sub_agent_wait_for_approval(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[task("explore", "CHILD-A: what does pkg/core.py define?")]),
                Turn(content="Approved and answered."),
            ],
            conversations=[child("CHILD-A", "pkg/core.py", "- pkg/core.py:1 defines add()")],
        )
    )
    rule = PermissionRule(permission="task", pattern="explore", action="ask")
    spec = delegating().model_copy(update={"permissions": [rule]})
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace, spec=spec)

        async def asked() -> list[Interaction]:
            for _ in range(1200):
                if (await handle.query(AgentRunWorkflow.progress)).pending_interactions:
                    break
                await asyncio.sleep(0.05)
            return await handle.query(AgentRunWorkflow.list_interactions)

        [ia] = await asyncio.wait_for(asked(), timeout=60)
        assert (ia.tool, ia.subject, ia.id) == ("task", "explore", "ia-1-2")
        assert llm.requests_of("CHILD-A") == {}  # nothing started before the decision
        await handle.execute_update(
            AgentRunWorkflow.decide,
            InteractionDecision(
                interaction_id=ia.id,
                decision="approve",
                approver="anonymous",
                payload_hash=ia.payload_hash,
            ),
        )
        result = await asyncio.wait_for(handle.result(), timeout=60)
        [done] = await handle.query(AgentRunWorkflow.list_interactions)
    assert result.status == "completed" and done.status == "executed"
    tools = [m for m in await store.conversation(handle.id, None) if m.role == "tool"]
    assert [t.content for t in tools] == ["- pkg/core.py:1 defines add()"]
