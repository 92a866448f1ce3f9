"""The sandbox `bash` commands run in: it owns what they start, and confines what they touch."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from keel.activities.tools.acting_tools import bash
from keel.activities.tools.file_tools import ToolOutput
from keel.activities.tools.sandbox import Sandbox
from keel.activities.tools.workspace import Workspace
from keel.workflows.gate.tool_specs import BashArgs

SANDBOXED = Sandbox.configured("bwrap")
pytestmark = pytest.mark.needs_bwrap


@pytest.fixture
def root(tmp_path: Path) -> Path:
    directory = tmp_path / "ws"
    directory.mkdir()
    return directory


@pytest.fixture
def ws(root: Path) -> Workspace:
    return Workspace(root)


def python(code: str, *, timeout_s: int = 30) -> BashArgs:
    return BashArgs(command=[sys.executable, "-c", textwrap.dedent(code)], timeout_s=timeout_s)


def run(ws: Workspace, code: str, *, sandbox: Sandbox = SANDBOXED, **kwargs: object) -> ToolOutput:
    network = bool(kwargs.pop("network", False))
    timeout_s = int(kwargs.pop("timeout_s", 30))  # type: ignore[call-overload]
    return bash(ws, python(code, timeout_s=timeout_s), sandbox=sandbox, network=network)


DAEMON = """
    import os, sys, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(2)
            open({path!r}, "w").write("escaped")
            sys.exit(0)
        os._exit(0)
    {then}
"""


def test_a_double_forked_setsid_process_is_dead_after_the_timeout(
    ws: Workspace, root: Path
) -> None:
    out = run(ws, DAEMON.format(path=str(root / "daemon.txt"), then="time.sleep(60)"), timeout_s=1)

    assert out.is_error and "timeout of 1 s" in out.text, out.text
    time.sleep(2.5)
    assert not (root / "daemon.txt").exists()


def test_a_daemon_dies_when_the_command_that_started_it_exits(ws: Workspace, root: Path) -> None:
    out = run(ws, DAEMON.format(path=str(root / "daemon.txt"), then="pass"))

    assert out.text == "exit code 0\n(no output)"
    time.sleep(2.5)
    assert not (root / "daemon.txt").exists()


def test_a_command_outlives_nothing_when_its_worker_is_killed(tmp_path: Path, root: Path) -> None:
    # A stand-in worker runs one long command through `bash` and is SIGKILLed mid-call.
    ticks = root / "ticks.txt"
    worker = textwrap.dedent(
        f"""
        import sys
        from keel.activities.tools.acting_tools import bash
        from keel.activities.tools.sandbox import Sandbox
        from keel.activities.tools.workspace import Workspace
        from keel.workflows.gate.tool_specs import BashArgs
        loop = "import time\\nwhile True:\\n open('ticks.txt', 'a').write('t')\\n time.sleep(0.1)"
        bash(Workspace({str(root)!r}), BashArgs(command=[sys.executable, "-c", loop],
             timeout_s=600), sandbox=Sandbox.configured("bwrap"))
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", worker], cwd=Path(__file__).parents[2])
    try:
        for _ in range(200):
            if ticks.exists() and len(ticks.read_text()) >= 3:
                break
            time.sleep(0.05)
        assert ticks.exists(), "the command never started"
        proc.kill()
        proc.wait()
        time.sleep(0.5)
        settled = len(ticks.read_text())
        time.sleep(1.0)
        assert len(ticks.read_text()) == settled, "the command outlived its worker"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_writes_outside_the_workspace_fail(ws: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    code = f"""
        import tempfile
        for path in [{str(outside / "x.txt")!r}, {str(Path.home() / ".keel-sandbox-probe")!r}]:
            try:
                open(path, "w").write("x")
                print("wrote", path)
            except OSError as exc:
                print("refused", exc.strerror)
        with tempfile.NamedTemporaryFile(dir="/tmp", delete=False) as fh:
            print("tmp", fh.name)
        open("inside.txt", "w").write("ok")
    """
    out = run(ws, code)

    assert not out.is_error, out.text
    # Beside the workspace under /tmp: hidden by the private /tmp; the home: read-only.
    assert "wrote" not in out.text and out.text.count("refused") == 2
    assert "refused Read-only file system" in out.text
    assert not (outside / "x.txt").exists()
    assert not (Path.home() / ".keel-sandbox-probe").exists()
    private_tmp = out.text.split("tmp ")[1].split()[0]
    assert not Path(private_tmp).exists()  # a private /tmp, gone with the call
    assert (ws.root / "inside.txt").read_text() == "ok"


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


def test_no_network_unless_a_rule_allows_it(ws: Workspace, listener: int) -> None:
    code = f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {listener}), timeout=3).close()
            print("connected")
        except OSError as exc:
            print("refused", type(exc).__name__)
    """
    assert "refused" in run(ws, code).text
    assert "connected" in run(ws, code, network=True).text


def test_the_data_directory_is_hidden(ws: Workspace, tmp_path: Path) -> None:
    data = tmp_path / "keel-data"
    data.mkdir()
    (data / "jwt-secret").write_text("s3cret")
    sandbox = Sandbox.configured("bwrap", hidden=(data,))
    code = f"""
        import os
        print(os.listdir({str(data)!r}))
    """
    out = run(ws, code, sandbox=sandbox)

    assert out.text == "exit code 0\n--- stdout ---\n[]", out.text


def test_without_bwrap_bash_says_so_and_runs_nothing(ws: Workspace, root: Path) -> None:
    missing = Sandbox(mode="bwrap", bwrap=None)

    out = run(ws, "open('ran.txt', 'w').write('x')", sandbox=missing)

    assert out.is_error and "bwrap" in out.text and "KEEL_BASH_SANDBOX=off" in out.text
    assert not (root / "ran.txt").exists()


def test_output_with_nul_and_bytes_that_are_not_text_is_kept_escaped(ws: Workspace) -> None:
    code = "import sys; print('a' + chr(0), flush=True); sys.stderr.buffer.write(b'\\xff\\xfe')"
    out = run(ws, code)

    assert not out.is_error
    assert "\0" not in out.text
    assert "--- stdout ---\na\\x00" in out.text
    assert "--- stderr ---\n\\xff\\xfe" in out.text
    assert "shown as \\xNN escapes" in out.text


def test_a_missing_program_and_a_signal_are_reported_as_they_happened(ws: Workspace) -> None:
    missing = bash(ws, BashArgs(command=["keel-no-such-program"]), sandbox=SANDBOXED)
    assert missing.is_error and "not found on PATH" in missing.text

    out = run(ws, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert out.text.startswith("exit code -9 (killed by SIGKILL)")
    exits = run(ws, "raise SystemExit(137)")
    assert exits.text.startswith("exit code 137\n")
