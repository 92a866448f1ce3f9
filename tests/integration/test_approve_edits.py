"""Approve with edits, as users do it: REST, the CLI and MCP approve a changed call.

The model does not cooperate: it proposes one thing, a person changes it, and the
edited payload is what runs, once; the gate refuses edits a model's call could not
make, and the interaction stays pending for a decision that can take.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.errors import A2AError
from google.protobuf.json_format import ParseDict
from google.protobuf.struct_pb2 import Value
from temporalio.client import Client

from keel.activities.store.audit import AuditLog
from keel.activities.store.run_store import Store
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.conftest import JWT_SECRET, token_for
from tests.integration.keel_http import (
    ALICE,
    LaunchKeel,
    MakeSettings,
    StartLLM,
    base_url,
    finished,
    pending,
)
from tests.integration.test_a2a import a2a_client, user_message
from tests.integration.test_a2a import keel as a2a_keel
from tests.integration.test_approvals import executions, start, write
from tests.integration.test_cli import clean_env, keel
from tests.integration.test_mcp import FINISHED, call, mcp_client, refused, until_run
from tests.integration.test_replay import HISTORIES, replayer


async def approve(
    http: httpx.AsyncClient, run_id: str, ia: dict[str, Any], arguments: dict[str, Any]
) -> httpx.Response:
    body = {"decision": "approve", "payload_hash": ia["payload_hash"], "arguments": arguments}
    return await http.post(f"/v1/runs/{run_id}/interactions/{ia['id']}", headers=ALICE, json=body)


async def still_pending(http: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    items = (await http.get(f"/v1/runs/{run_id}/interactions", headers=ALICE)).json()
    return [i for i in items if i["status"] == "pending"]


def tool_messages(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


async def test_an_edited_write_runs_once_as_edited_and_the_model_and_audit_know(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    database_url: str,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[write("notes/out.txt", "hello")]),
                Turn(content="Wrote the file."),
            ]
        )
    )
    async with keel_app(llm, headers={}) as http:
        run_id = await start(http, workspace)
        [ia] = await pending(http, run_id)

        outside = await approve(http, run_id, ia, {"path": "../escaped.txt", "content": "x"})
        assert outside.status_code == 422, outside.text
        assert "outside the run's workspace" in outside.text
        absolute = await approve(http, run_id, ia, {"path": "/tmp/escaped.txt", "content": "x"})
        assert absolute.status_code == 422 and "outside" in absolute.text
        unschemed = await approve(http, run_id, ia, {"path": "notes/out.txt", "content": 5})
        assert unschemed.status_code == 422 and "content" in unschemed.text
        other_tool = await approve(http, run_id, ia, {"command": ["ls"]})
        assert other_tool.status_code == 422
        always = await http.post(
            f"/v1/runs/{run_id}/interactions/{ia['id']}",
            headers=ALICE,
            json={
                "decision": "approve_always",
                "payload_hash": ia["payload_hash"],
                "arguments": {"path": "notes/b.txt", "content": "x"},
            },
        )
        assert always.status_code == 422 and "approved once" in always.text
        # Refused edits leave the request as it was, and nothing ran.
        assert [i["id"] for i in await still_pending(http, run_id)] == [ia["id"]]
        assert not (workspace / "escaped.txt").exists()
        assert not Path("/tmp/escaped.txt").exists()

        edited = {"path": "notes/edited.txt", "content": "edited by a person"}
        accepted = await approve(http, run_id, ia, edited)
        assert accepted.status_code == 200, accepted.text
        shown = accepted.json()["interaction"]
        assert shown["status"] == "approved"
        assert shown["payload_hash"] == ia["payload_hash"]
        approved_hash = shown["approved_hash"]
        assert approved_hash and approved_hash != ia["payload_hash"]
        # The same edit again is a retry: it took.
        again = await approve(http, run_id, ia, edited)
        assert again.status_code == 200 and again.json()["status"] == "accepted", again.text

        run = await finished(http, run_id)
        assert run["status"] == "completed", run
        [done] = (await http.get(f"/v1/runs/{run_id}/interactions", headers=ALICE)).json()
        assert done["status"] == "executed"
        assert done["approved_arguments"] == edited and done["approved_hash"] == approved_hash

    assert (workspace / "notes" / "edited.txt").read_text() == "edited by a person"
    assert not (workspace / "notes" / "out.txt").exists()
    assert await executions(database_url, run_id) == 1
    [told] = tool_messages(llm.last_request(1))
    assert told.startswith("Note: user:alice approved this write_file call with changes")
    assert '"notes/out.txt" -> "notes/edited.txt"' in told
    assert '"hello" -> "edited by a person"' in told

    entries = [
        e
        for e in await AuditLog(store.pool).entries("default", limit=1000)
        if (e.subject or "").startswith(run_id) and e.action == "interaction.approved"
    ]
    [entry] = entries
    assert entry.actor == "user:alice" and entry.detail["edited_by"] == "user:alice"
    assert entry.detail["proposed_hash"] == ia["payload_hash"]
    assert entry.detail["approved_hash"] == approved_hash
    assert json.loads(str(entry.detail["approved_arguments"])) == edited

    history = await temporal_client.get_workflow_handle(run_id).fetch_history()
    assert (await replayer().replay_workflow(history)).replay_failure is None
    if os.environ.get("KEEL_RECORD_HISTORY"):
        # KEEL_RECORD_HISTORY=1: keep this run's history for test_replay.
        target = HISTORIES / "agent_run_edited_approval.json"
        target.write_text(json.dumps(history.to_json_dict(), indent=1))


async def test_an_edit_into_a_denied_command_is_refused_and_the_call_can_still_be_decided(
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[ScriptedToolCall(name="bash", arguments={"command": ["ls"]})]),
                Turn(content="Stopped."),
            ]
        )
    )
    async with keel_app(llm, headers={}) as http:
        run_id = await start(http, workspace)
        [ia] = await pending(http, run_id)
        denied = await approve(http, run_id, ia, {"command": ["rm", "-rf", "."]})
        assert denied.status_code == 422, denied.text
        assert "denied by the rule bash rm -rf* deny" in denied.text
        outside = await approve(http, run_id, ia, {"command": ["ls"], "cwd": "../.."})
        assert outside.status_code == 422 and "outside" in outside.text
        assert [i["id"] for i in await still_pending(http, run_id)] == [ia["id"]]
        rejected = await http.post(
            f"/v1/runs/{run_id}/interactions/{ia['id']}",
            headers=ALICE,
            json={"decision": "reject", "text": "not now"},
        )
        assert rejected.status_code == 200, rejected.text
        assert (await finished(http, run_id))["status"] == "completed"
    [told] = tool_messages(llm.last_request(1))
    assert "rejected" in told and "with changes" not in told


@pytest.mark.slow  # starts `keel` processes, as the other tests of the slow lane do
async def test_keel_approve_with_args_runs_the_edited_call(
    workspace: Path, tmp_path: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[write("CHANGELOG.md", "## 1.0\n")]),
                Turn(content="Added the changelog."),
            ]
        )
    )
    async with keel_app(llm) as http:
        env = clean_env(
            KEEL_API_URL=base_url(http),
            KEEL_DATA_DIR=str(tmp_path / "cli"),
            KEEL_JWT_SECRET=JWT_SECRET,
            COLUMNS="200",
        )
        run = await asyncio.create_subprocess_exec(
            sys.executable,
            *("-m", "keel.api.cli.main", "run", "build", "Add a changelog."),
            *("--workspace", str(workspace)),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert run.stdout is not None
        seen: list[str] = []
        waiting = None
        while waiting is None:
            line = (await asyncio.wait_for(run.stdout.readline(), timeout=60)).decode()
            assert line, "".join(seen)
            seen.append(line)
            waiting = re.search(r"`keel approve (\S+) (\S+)`", line)
        run_id, interaction_id = waiting.group(1), waiting.group(2)

        code, out = await keel("approve", run_id, interaction_id, "--args", "{not json", env=env)
        assert code == 1 and "not valid JSON" in out, out
        code, out = await keel(
            "approve",
            run_id,
            interaction_id,
            "--args",
            '{"path": "/etc/x", "content": "x"}',
            env=env,
        )
        assert code == 1 and "outside the run's workspace" in out, out
        edit = tmp_path / "edit.json"
        edit.write_text(json.dumps({"path": "CHANGES.md", "content": "## 1.0 (edited)\n"}))
        code, out = await keel("approve", run_id, interaction_id, "--args", str(edit), env=env)
        assert code == 0 and "accepted" in out, out
        assert '~ path: "CHANGELOG.md" -> "CHANGES.md"' in out, out

        rest, _ = await asyncio.wait_for(run.communicate(), timeout=60)
        assert run.returncode == 0, "".join(seen) + rest.decode()
    assert (workspace / "CHANGES.md").read_text() == "## 1.0 (edited)\n"
    assert not (workspace / "CHANGELOG.md").exists()
    [told] = tool_messages(llm.last_request(1))
    assert "with changes" in told and "CHANGES.md" in told


async def test_an_agent_decides_over_mcp_with_edited_arguments(
    workspace: Path, keel_app: LaunchKeel
) -> None:
    script = Script(
        turns=[
            Turn(tool_calls=[write("notes/out.txt", "hello")]),
            Turn(content="Wrote the file."),
        ]
    )
    tenant = f"mcp-{uuid.uuid4().hex[:8]}"
    async with (
        keel_app(script) as http,
        mcp_client(base_url(http), token_for(tenant, "alice")) as alice,
    ):
        started = await call(
            alice, "start_run", agent="build", input="Make the change.", workspace=str(workspace)
        )
        run_id = started["run_id"]
        waiting = await until_run(alice, run_id, lambda d: bool(d["pending_interactions"]))
        [ia] = waiting["pending_interactions"]
        approve = {
            "run_id": run_id,
            "interaction_id": ia["id"],
            "decision": "approve",
            "payload_hash": ia["payload_hash"],
        }
        escaped = await refused(
            alice, "decide", **approve, arguments={"path": "../x.txt", "content": "x"}
        )
        assert "outside the run's workspace" in escaped
        accepted = await call(
            alice, "decide", **approve, arguments={"path": "notes/mcp.txt", "content": "via mcp"}
        )
        assert accepted["status"] == "accepted"
        assert accepted["interaction"]["approved_hash"] not in (None, ia["payload_hash"])
        done = await until_run(alice, run_id, lambda d: d["run"]["status"] in FINISHED)
        assert done["run"]["status"] == "completed"
    assert (workspace / "notes" / "mcp.txt").read_text() == "via mcp"
    assert not (workspace / "notes" / "out.txt").exists()
    assert not (workspace.parent / "x.txt").exists()


async def test_an_edit_racing_a_reject_one_wins_and_everything_agrees(
    store: Store,
    workspace: Path,
    database_url: str,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(
        Script(turns=[Turn(tool_calls=[write("proposed.txt", "p")]), Turn(content="done")])
    )
    edited = {"path": "edited.txt", "content": "e"}
    winners: set[str] = set()
    async with keel_app(llm, headers={}) as http:
        for round_ in range(3):
            root = workspace / f"round-{round_}"
            root.mkdir()
            run_id = await start(http, root)
            [ia] = await pending(http, run_id)
            reject = {"decision": "reject", "text": "no"}
            url = f"/v1/runs/{run_id}/interactions/{ia['id']}"
            requests = [
                approve(http, run_id, ia, edited)
                if i % 2 == 0
                else http.post(url, headers=ALICE, json=reject)
                for i in range(10)
            ]
            answers = await asyncio.gather(*requests)
            kinds = ["edit" if i % 2 == 0 else "reject" for i in range(10)]
            took = {k for k, a in zip(kinds, answers, strict=True) if a.status_code == 200}
            assert len(took) == 1, [(a.status_code, a.text) for a in answers]
            assert all(a.status_code in (200, 409) for a in answers)
            [winner] = took
            winners.add(winner)
            assert (await finished(http, run_id))["status"] == "completed"
            [stored] = (await http.get(f"/v1/runs/{run_id}/interactions", headers=ALICE)).json()
            audit = [
                e
                for e in await AuditLog(store.pool).entries("default", limit=10_000)
                if e.subject == f"{run_id}/{ia['id']}"
                and e.action in ("interaction.approved", "interaction.rejected")
            ]
            assert not (root / "proposed.txt").exists()
            if winner == "edit":
                assert stored["status"] == "executed" and stored["approved_arguments"] == edited
                assert (root / "edited.txt").read_text() == "e"
                assert await executions(database_url, run_id) == 1
                [entry] = audit
                assert entry.detail["approved_hash"] == stored["approved_hash"]
            else:
                assert stored["status"] == "rejected" and stored["approved_hash"] is None
                assert not (root / "edited.txt").exists()
                assert [e.action for e in audit] == ["interaction.rejected"]


async def test_an_a2a_follow_up_approves_with_edited_arguments(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(turns=[Turn(tool_calls=[write("NOTES.md", "hi\n")]), Turn(content="Wrote it.")])
    )
    settings = settings_for(llm, workspace, api_port=free_port())
    async with (
        a2a_keel(temporal_client, store, settings) as url,
        a2a_client(url, streaming=False, agent="build") as client,
    ):
        [started] = [r async for r in client.send_message(user_message("Add notes"))]
        task_id = started.task.id
        assert started.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

        def follow(message_id: str, arguments: dict[str, Any]) -> SendMessageRequest:
            data = ParseDict({"decision": "approve", "arguments": arguments}, Value())
            return SendMessageRequest(
                message=Message(
                    message_id=message_id,
                    role=Role.ROLE_USER,
                    task_id=task_id,
                    parts=[Part(data=data)],
                )
            )

        with pytest.raises(A2AError) as refused:
            _ = [
                r
                async for r in client.send_message(
                    follow("m-up", {"path": "../N.md", "content": "x"})
                )
            ]
        assert "outside the run's workspace" in str(refused.value)
        [answered] = [
            r
            async for r in client.send_message(
                follow("m-edit", {"path": "docs/NOTES.md", "content": "edited\n"})
            )
        ]
        assert answered.task.status.state == TaskState.TASK_STATE_COMPLETED, answered
    assert (workspace / "docs" / "NOTES.md").read_text() == "edited\n"
    assert not (workspace / "NOTES.md").exists()
    [told] = tool_messages(llm.last_request(1))
    assert "with changes" in told and "docs/NOTES.md" in told
