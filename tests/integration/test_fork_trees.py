"""Where the workspace is a git work tree (KEEL_WORKSPACE_TREES on), Keel records a commit
of its files before a run's first write and after each step that wrote, leaving the work
tree, index and branches alone; a fork names the commit of its step, and can run on a
worktree of it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.integration.conftest import LaunchKeel
from tests.integration.keel_http import finished

WRITER = """---
name: writer
description: Writes notes.
tools: [read_file, write_file]
permissions:
  - {permission: edit, pattern: "*", action: allow}
---
You write notes.
"""


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def committed(workspace: Path) -> None:
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "add", "-A")
    git(workspace, "-c", "user.name=T", "-c", "user.email=t@x", "commit", "-qm", "start")


def write(text: str) -> Turn:
    call = ScriptedToolCall(name="write_file", arguments={"path": "notes/a.txt", "content": text})
    return Turn(tool_calls=[call])


async def test_a_fork_names_the_workspace_commit_of_its_step_and_runs_on_its_worktree(
    keel_app: LaunchKeel, workspace: Path, tmp_path: Path
) -> None:
    committed(workspace)
    head, index = git(workspace, "rev-parse", "HEAD"), git(workspace, "ls-files", "-s")
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "writer.md").write_text(WRITER)
    script = Script(turns=[write("one"), write("two"), Turn(content="Written.")])
    async with keel_app(
        script, workspace_trees=True, agents_dir=agents, workspace_root=tmp_path
    ) as http:
        created = await http.post(
            "/v1/runs", json={"agent": "writer", "input": "Write.", "workspace": str(workspace)}
        )
        assert created.status_code == 201, created.text
        run = await finished(http, created.json()["id"])
        assert run["status"] == "completed" and run["steps"] == 3, run

        # The work tree, the branch and the index are as the run left them.
        assert (workspace / "notes" / "a.txt").read_text() == "two"
        assert git(workspace, "rev-parse", "HEAD") == head
        assert git(workspace, "ls-files", "-s") == index
        assert git(workspace, "status", "--porcelain") == "?? notes/"

        forks = {}
        for step in (0, 1, 2):
            answer = await http.post(f"/v1/runs/{run['id']}/fork", json={"step": step})
            assert answer.status_code == 201, answer.text
            forks[step] = answer.json()["forked_tree"]
            await finished(http, answer.json()["id"])  # forks write too: one at a time
        assert git(workspace, "cat-file", "-t", forks[0]) == "commit"
        assert "notes/a.txt" not in git(workspace, "ls-tree", "-r", "--name-only", forks[0])
        assert git(workspace, "show", f"{forks[1]}:notes/a.txt") == "one"
        assert git(workspace, "show", f"{forks[2]}:notes/a.txt") == "two"
        assert git(workspace, "rev-parse", f"{forks[1]}^") == head
        refs = git(workspace, "for-each-ref", "--format=%(refname)", f"refs/keel/{run['id']}/")
        assert refs.splitlines() == [f"refs/keel/{run['id']}/step-{n}" for n in (0, 1, 2)]

        # A fork on a worktree of its step's commit starts from those files.
        tree = tmp_path / "at-step-1"
        git(workspace, "worktree", "add", "-q", "--detach", str(tree), forks[1])
        assert (tree / "notes" / "a.txt").read_text() == "one"
        moved = await http.post(
            f"/v1/runs/{run['id']}/fork", json={"step": 1, "workspace": str(tree)}
        )
        assert moved.status_code == 201, moved.text
        assert moved.json()["workspace"] == str(tree)
        outside = await http.post(
            f"/v1/runs/{run['id']}/fork", json={"step": 1, "workspace": "/etc"}
        )
        assert outside.status_code == 422, outside.text
