"""Tools that run on the client (`local_tool_result`): a server reviews what it cannot see.

`keel run --local-tools` starts a run whose read tools the CLI executes on its own
directory, outside the server's workspace root; the worker never runs them. Over
HTTP, a result that is not a tool output is refused, and an unanswered call expires.
"""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.worker.scripted.llm import Script, Turn
from tests.conftest import JWT_SECRET
from tests.integration.conftest import LaunchKeel
from tests.integration.keel_http import StartLLM, base_url
from tests.integration.test_approvals import ALICE, BOB, finished, pending
from tests.integration.test_cli import clean_env, keel
from tests.integration.test_mcp_tools import call, history_text, tool_messages


def laptop(tmp_path: Path) -> Path:
    """A directory only the client can read: outside the server's workspace root."""
    root = tmp_path / "laptop" / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "billing.py").write_text("def charge(amount):\n    return amount * 1.2\n")
    (root / "PLAN.md").write_text("# Plan\nShip billing on Friday.\n")
    return root


async def test_keel_run_local_tools_reviews_a_directory_only_the_client_can_read(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    tmp_path: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    project = laptop(tmp_path)  # the server's root is `workspace`, elsewhere
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[call("list_files", pattern="**/*.py")]),
                Turn(tool_calls=[call("read_file", path="src/billing.py")]),
                Turn(content="## Findings\n- billing.py multiplies by 1.2\n\nFiles:\n{files_read}"),
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
        code, out = await keel(
            "run", "review", "Review the billing code.", "--workspace", str(project),
            "--local-tools", env=env,
        )  # fmt: skip
    assert code == 0, out
    assert f"(review) on {project} (read here)" in out  # not the server's workspace
    report = out.split("Findings", 1)[1]
    assert "billing.py multiplies by 1.2" in report
    assert "src/billing.py" in report.split("Files:", 1)[1]  # the file the client read
    # Each call's line, then the client's answer to it (the run records the answer first).
    lines = [line.strip() for line in out.splitlines()]
    for tool in ("list_files", "read_file"):
        at = next(i for i, line in enumerate(lines) if line.startswith(f"→ {tool} "))
        assert " answered by " in lines[at + 1], lines[at : at + 3]
    listing, source = tool_messages(llm, 2)
    assert "src/billing.py" in listing
    assert "return amount * 1.2" in source
    run_id = out.split("Run ", 1)[1].split()[0]
    run = await store.get_run(run_id)
    assert run is not None and run.status == "completed"
    assert not project.is_relative_to(workspace)
    history = await history_text(temporal_client.get_workflow_handle(run_id))
    assert '"run_tool"' not in history and "src/billing.py" in history
    # No tool ran on the worker: every read went to the client and came back as its answer.
    events = await store.list_events(run_id)
    kinds = [e.data.get("kind") for e in events if e.type == "interaction_pending"]
    assert kinds == ["local_tool_result", "local_tool_result"]


async def test_a_result_that_is_no_tool_output_is_refused_and_an_unanswered_call_expires(
    scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[call("read_file", path="PLAN.md")]),
                Turn(content="Could not read the plan."),
            ]
        )
    )
    async with keel_app(llm) as http:
        created = await http.post(
            "/v1/runs",
            headers=ALICE,
            json={
                "agent": "review",
                "input": "Read the plan.",
                "workspace": ".",
                "local_tools": ["read_file"],
                "approval_expires_after_s": 3,
            },
        )
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        [ia] = await pending(http, run_id)
        assert (ia["kind"], ia["tool"], ia["approvers"]) == (
            "local_tool_result",
            "read_file",
            ["user:alice"],
        )
        target = f"/v1/runs/{run_id}/interactions/{ia['id']}"
        empty = await http.post(target, headers=ALICE, json={"decision": "answer"})
        assert empty.status_code == 422, empty.text
        assert "needs its output" in empty.text
        approving = await http.post(
            target, headers=ALICE, json={"decision": "approve", "payload_hash": ia["payload_hash"]}
        )
        assert approving.status_code == 422 and "client-executed" in approving.text
        too_long = await http.post(
            target, headers=ALICE, json={"decision": "answer", "text": "x" * 300_000}
        )
        assert too_long.status_code == 422
        other = await http.post(target, headers=BOB, json={"decision": "answer", "text": "hi"})
        assert other.status_code == 403  # only the client that started the run answers
        run = await finished(http, run_id)
    assert run["status"] == "completed"
    [told] = tool_messages(llm, 1)
    assert told.startswith("Error: the client did not run this read_file call before it expired")
