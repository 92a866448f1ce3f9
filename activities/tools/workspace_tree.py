"""A git commit of a workspace's files as they are now, for a fork to start from.

Made with git's plumbing and a throwaway index — `read-tree HEAD`, `add -A`, `write-tree`,
`commit-tree` — so the work tree, the real index and every branch stay as they were;
tracked and untracked files are in it, ignored ones are not. The commit is kept from
git's garbage collection by a ref under `refs/keel/`. Each git command is an argument
list (no shell), with a timeout; any failure means no commit, never a failed tool call.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from keel.activities.store.workspace_tree_store import WorkspaceTrees

__all__ = ["WorkspaceTreeRecorder", "tree_commit"]

log = logging.getLogger("keel.worker")

GIT_TIMEOUT_S = 20.0
"""A snapshot of a large tree may take seconds; a stuck git must not hold the tool's slot."""
IDENTITY = {
    "GIT_AUTHOR_NAME": "Keel",
    "GIT_AUTHOR_EMAIL": "keel@localhost",
    "GIT_COMMITTER_NAME": "Keel",
    "GIT_COMMITTER_EMAIL": "keel@localhost",
}


class _GitFailed(Exception):
    """A git command of the snapshot failed; the step goes on without a tree."""


def _git(git: str, cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [git, "-C", str(cwd), *args],
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT_S,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise _GitFailed(done.stderr.strip()[:500])
    return done.stdout.strip()


def tree_commit(workspace: Path, *, run_id: str, step: int) -> str | None:
    """The commit of the workspace's files now (None when it is not in a git work tree,
    git is missing, or git fails), kept under `refs/keel/RUN/step-N`."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        top = Path(_git(git, workspace, "rev-parse", "--show-toplevel"))
        with tempfile.TemporaryDirectory(prefix="keel-tree-") as tmp:
            # Only what these commands need: no user config, hooks or pager come along.
            env = {**IDENTITY, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
            try:
                head: str | None = _git(git, top, "rev-parse", "--verify", "HEAD", env=env)
            except _GitFailed:
                head = None  # a repository without a commit yet
            if head is not None:
                _git(git, top, "read-tree", head, env=env)
            _git(git, top, "add", "-A", "--", ".", env=env)
            tree = _git(git, top, "write-tree", env=env)
            parents = ["-p", head] if head is not None else []
            message = f"Keel: the workspace of run {run_id} after step {step}"
            commit = _git(git, top, "commit-tree", tree, *parents, "-m", message, env=env)
            safe = re.sub(r"[^A-Za-z0-9_.-]", "-", run_id).strip(".") or "run"
            _git(git, top, "update-ref", f"refs/keel/{safe}/step-{step}", commit, env=env)
            return commit
    except (_GitFailed, OSError, subprocess.TimeoutExpired) as exc:
        log.warning("No workspace commit for run %s step %s: %s", run_id, step, exc)
        return None


class WorkspaceTreeRecorder:
    """Records a run's workspace commits around its writing tool calls (`write`/`exec`
    risk): once before its first, as step 0 (the tree it started from), then after each
    step that wrote. Off unless KEEL_WORKSPACE_TREES is set; a workspace outside git
    records nothing."""

    def __init__(self, trees: WorkspaceTrees, *, enabled: bool) -> None:
        self._trees = trees
        self.enabled = enabled

    async def before_write(self, run_id: str, workspace: Path) -> None:
        if self.enabled and not await self._trees.has_any(run_id):
            await self._record(run_id, 0, workspace)

    async def after_write(self, run_id: str, step: int, workspace: Path) -> None:
        if self.enabled:
            await self._record(run_id, step, workspace)

    async def _record(self, run_id: str, step: int, workspace: Path) -> None:
        commit = await asyncio.to_thread(tree_commit, workspace, run_id=run_id, step=step)
        if commit is not None:
            await self._trees.record(run_id, step, commit)
