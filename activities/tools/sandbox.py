"""Where `bash` commands run: a bubblewrap sandbox that owns every process they start.

Each call gets its own PID namespace that dies with it (`--unshare-pid
--die-with-parent`): whatever the command forks, double-forks or moves to a new
session dies when the command exits, when its timeout kills it, and when the worker
itself dies. The file system is read-only except the run's workspace (and a private,
empty `/tmp`); `/run` and Keel's data directory are hidden; there is no network unless
a `network` rule allows it for the command line.

`KEEL_BASH_SANDBOX=off` runs commands without it (a process group the timeout kills,
nothing more); with the sandbox on and no `bwrap` installed, `bash` answers with an
error that says so rather than run unconfined.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["LAUNCHER", "Launch", "Sandbox", "SandboxMode"]

SandboxMode = Literal["bwrap", "off"]

LAUNCHER = Path(__file__).with_name("sandbox_launch.py")
"""Starts the command inside the sandbox and reports how it started and ended."""

EMPTIED = (Path("/tmp"), Path("/run"))
"""Mounted empty inside the sandbox."""

MISSING_BWRAP = (
    "bash is unavailable on this worker: commands run in a bubblewrap sandbox and the "
    "`bwrap` program is not installed. Tell the user; an operator can install the "
    "`bubblewrap` package (apt-get install bubblewrap), or set KEEL_BASH_SANDBOX=off to "
    "run commands without a sandbox."
)


@dataclass(frozen=True)
class Launch:
    """The argv to start, and whether its launcher reports on `report_fd`."""

    argv: list[str]
    reports: bool


@dataclass(frozen=True)
class Sandbox:
    """How this worker confines commands; built once from the settings."""

    mode: SandboxMode = "bwrap"
    bwrap: str | None = None
    hidden: tuple[Path, ...] = ()
    """Directories the command must not read (Keel's data directory with its secrets)."""

    @classmethod
    def configured(cls, mode: SandboxMode, *, hidden: tuple[Path, ...] = ()) -> Sandbox:
        return cls(mode=mode, bwrap=shutil.which("bwrap"), hidden=hidden)

    @property
    def problem(self) -> str | None:
        """Why commands cannot run here, as the sentence the model is told; None if they can."""
        if self.mode == "bwrap" and self.bwrap is None:
            return MISSING_BWRAP
        return None

    def launch(
        self, command: list[str], *, workspace: Path, cwd: Path, network: bool, report_fd: int
    ) -> Launch:
        """The argv that runs `command` in `cwd`, confined as `mode` says."""
        if self.mode == "off":
            return Launch(argv=list(command), reports=False)
        assert self.bwrap is not None, "check `problem` first"
        argv = [
            self.bwrap,
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--new-session",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            # Unix sockets (a database's, a container runtime's) live here; a read-only
            # mount does not stop connecting to them.
            "--tmpfs",
            "/run",
        ]
        # Keel's own Python and launcher, read-only, where they live under one of those
        # (a checkout or a virtualenv in /tmp): the launcher must start in there.
        for path in (Path(sys.prefix), LAUNCHER.parent):
            if any(path.is_relative_to(empty) for empty in EMPTIED):
                argv += ["--ro-bind", str(path), str(path)]
        for path in self.hidden:
            if path.is_dir() and not workspace.is_relative_to(path.resolve()):
                argv += ["--tmpfs", str(path.resolve())]
        if not network:
            argv.append("--unshare-net")
        argv += ["--bind", str(workspace), str(workspace), "--chdir", str(cwd), "--"]
        argv += [sys.executable, "-I", "-S", str(LAUNCHER), str(report_fd), "--", *command]
        return Launch(argv=argv, reports=True)


@dataclass(frozen=True)
class LaunchReport:
    """What the launcher wrote: the command's wait status, or why it did not start."""

    status: int | None = None
    errno: int | None = None

    @classmethod
    def parse(cls, raw: bytes) -> LaunchReport | None:
        try:
            data = json.loads(raw.decode() or "null")
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None
        if not isinstance(data, dict):
            return None
        status, errno = data.get("status"), data.get("errno")
        return cls(
            status=status if isinstance(status, int) else None,
            errno=errno if isinstance(errno, int) else None,
        )

    @property
    def returncode(self) -> int | None:
        """As `subprocess` spells it: negative for a killing signal."""
        if self.status is None:
            return None
        return os.waitstatus_to_exitcode(self.status)
