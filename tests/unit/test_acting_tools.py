"""The tools that change the workspace: write_file, edit_file and bash."""

from __future__ import annotations

import os
import stat
import sys
import textwrap
import time
from pathlib import Path

import pytest

from keel.activities.tools.acting_tools import bash, edit_file, write_file
from keel.activities.tools.file_tools import ToolOutput
from keel.activities.tools.sandbox import Sandbox
from keel.activities.tools.workspace import Workspace
from keel.workflows.gate.tool_specs import BashArgs, EditFileArgs, WriteFileArgs


@pytest.fixture
def root(tmp_path: Path) -> Path:
    directory = tmp_path / "ws"
    directory.mkdir()
    return directory


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace that the tools must never write into."""
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "secret.txt").write_text("TOP SECRET\n")
    return directory


@pytest.fixture
def ws(root: Path) -> Workspace:
    return Workspace(root)


def assert_error(out: ToolOutput, *fragments: str) -> None:
    assert out.is_error, out.text
    assert out.text.startswith("Error: "), out.text
    for fragment in fragments:
        assert fragment in out.text, out.text


def put(ws: Workspace, path: str, content: str) -> ToolOutput:
    return write_file(ws, WriteFileArgs(path=path, content=content))


def edit(ws: Workspace, path: str, old: str, new: str) -> ToolOutput:
    return edit_file(ws, EditFileArgs(path=path, old_string=old, new_string=new))


SANDBOXED = Sandbox.configured("bwrap")
UNCONFINED = Sandbox(mode="off")


@pytest.fixture(
    params=[UNCONFINED, pytest.param(SANDBOXED, marks=pytest.mark.needs_bwrap)],
    ids=["off", "bwrap"],
)
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    """Each `bash` test runs unconfined and, where bubblewrap is installed, in its sandbox."""
    chosen: Sandbox = request.param
    return chosen


def run(ws: Workspace, sandbox: Sandbox, *command: str, **kwargs: object) -> ToolOutput:
    cap = kwargs.pop("output_cap", 65_536)
    assert isinstance(cap, int)
    args = BashArgs.model_validate({"command": list(command), **kwargs})
    return bash(ws, args, sandbox=sandbox, output_cap=cap)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


# ---------------------------------------------------------------- write_file


def test_write_creates_parent_directories_and_the_file(ws: Workspace, root: Path) -> None:
    out = put(ws, "src/pkg/mod.py", "print('hé')\n")

    assert not out.is_error, out.text
    assert out.text == "Created src/pkg/mod.py (13 bytes)."
    assert out.seen == ("src/pkg/mod.py",)
    assert (root / "src/pkg/mod.py").read_bytes() == "print('hé')\n".encode()


def test_write_overwrites_atomically_and_keeps_the_mode(ws: Workspace, root: Path) -> None:
    script = root / "run.sh"
    script.write_text("old\n")
    script.chmod(0o750)

    out = put(ws, "run.sh", "new\n")

    assert out.text == "Overwrote run.sh (4 bytes)."
    assert script.read_text() == "new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert sorted(p.name for p in root.iterdir()) == ["run.sh"]  # No temporary file left.


def test_write_new_file_gets_the_usual_mode(ws: Workspace, root: Path) -> None:
    put(ws, "new.txt", "x")

    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((root / "new.txt").stat().st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("path", ["../x.txt", "a/../../x.txt"])
def test_write_refuses_dotdot_escape(ws: Workspace, tmp_path: Path, path: str) -> None:
    assert_error(put(ws, path, "x"), "outside the workspace")
    assert not (tmp_path / "x.txt").exists()


def test_write_refuses_absolute_path_outside(ws: Workspace, outside: Path) -> None:
    assert_error(put(ws, str(outside / "new.txt"), "x"), "outside the workspace")
    assert not (outside / "new.txt").exists()


def test_write_refuses_symlinked_directory_leading_out(
    ws: Workspace, root: Path, outside: Path
) -> None:
    (root / "linkdir").symlink_to(outside, target_is_directory=True)

    assert_error(put(ws, "linkdir/new.txt", "x"), "outside the workspace")
    assert_error(put(ws, "linkdir/secret.txt", "x"), "outside the workspace")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


@pytest.mark.parametrize("path", [".git/config", "sub/.git/hooks/pre-commit", ".GIT/HEAD"])
def test_write_refuses_git_directories(ws: Workspace, root: Path, path: str) -> None:
    (root / ".git").mkdir()

    assert_error(put(ws, path, "x"), ".git")
    assert list((root / ".git").iterdir()) == []


def test_write_refuses_a_link_into_git(ws: Workspace, root: Path) -> None:
    (root / ".git").mkdir()
    (root / "g").symlink_to(root / ".git", target_is_directory=True)

    assert_error(put(ws, "g/config", "x"), ".git")
    assert list((root / ".git").iterdir()) == []


def test_write_refuses_a_symlink_even_inside(ws: Workspace, root: Path) -> None:
    (root / "real.txt").write_text("real\n")
    (root / "alias.txt").symlink_to(root / "real.txt")
    (root / "dangling.txt").symlink_to(root / "nowhere.txt")

    assert_error(put(ws, "alias.txt", "x"), "symbolic link")
    assert_error(put(ws, "dangling.txt", "x"), "symbolic link")
    assert (root / "real.txt").read_text() == "real\n"
    assert (root / "alias.txt").is_symlink()
    assert not (root / "nowhere.txt").exists()


def test_write_through_a_symlinked_directory_inside_is_allowed(ws: Workspace, root: Path) -> None:
    (root / "real").mkdir()
    (root / "alias").symlink_to(root / "real", target_is_directory=True)

    out = put(ws, "alias/a.txt", "x")

    assert out.text == "Created real/a.txt (1 byte)."
    assert (root / "real/a.txt").read_text() == "x"


def test_write_refuses_a_directory(ws: Workspace, root: Path) -> None:
    (root / "sub").mkdir()

    assert_error(put(ws, "sub", "x"), "is a directory")
    assert_error(put(ws, ".", "x"), "is a directory")


def test_write_under_a_file_is_an_error(ws: Workspace, root: Path) -> None:
    (root / "file.txt").write_text("x")

    assert_error(put(ws, "file.txt/inner.txt", "x"), "is a file, not a directory")


def test_write_refuses_unpaired_surrogates(ws: Workspace, root: Path) -> None:
    # Validation refuses them; a model built without it must still not raise.
    args = WriteFileArgs.model_construct(path="a.txt", content="bad \ud800")

    assert_error(write_file(ws, args), "UTF-8")
    assert not (root / "a.txt").exists()


# ---------------------------------------------------------------- edit_file

SOURCE = "".join(f"line {n}\n" for n in range(1, 11))


def test_edit_replaces_the_unique_occurrence(ws: Workspace, root: Path) -> None:
    path = root / "f.txt"
    path.write_text(SOURCE)
    path.chmod(0o640)

    out = edit(ws, "f.txt", "line 5\n", "five\ncinq\n")

    assert not out.is_error, out.text
    assert path.read_text() == SOURCE.replace("line 5\n", "five\ncinq\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert out.seen == ("f.txt",)
    assert out.text.splitlines() == [
        "Edited f.txt; lines 5-6 changed. Lines 2-9 now read:",
        "2\tline 2",
        "3\tline 3",
        "4\tline 4",
        "5\tfive",
        "6\tcinq",
        "7\tline 6",
        "8\tline 7",
        "9\tline 8",
    ]


def test_edit_inside_a_line_keeps_crlf(ws: Workspace, root: Path) -> None:
    path = root / "f.txt"
    path.write_bytes(b"one\r\ntwo\r\nthree\r\n")

    out = edit(ws, "f.txt", "two", "TWO")

    assert path.read_bytes() == b"one\r\nTWO\r\nthree\r\n"
    assert "2\tTWO" in out.text.splitlines()


def test_edit_not_found(ws: Workspace, root: Path) -> None:
    (root / "f.txt").write_text(SOURCE)

    assert_error(edit(ws, "f.txt", "line 11", "x"), "not found", "read the file again")
    assert (root / "f.txt").read_text() == SOURCE


def test_edit_multiple_occurrences(ws: Workspace, root: Path) -> None:
    (root / "f.txt").write_text(SOURCE)

    assert_error(edit(ws, "f.txt", "line 1", "x"), "2 times", "surrounding")  # 1 and 10
    assert_error(edit(ws, "f.txt", "line", "x"), "10 times")
    assert (root / "f.txt").read_text() == SOURCE


def test_edit_overlapping_occurrences_are_ambiguous(ws: Workspace, root: Path) -> None:
    (root / "f.txt").write_text("aaa\n")

    assert_error(edit(ws, "f.txt", "aa", "b"), "2 times")


def test_edit_identical_strings(ws: Workspace, root: Path) -> None:
    (root / "f.txt").write_text(SOURCE)

    assert_error(edit(ws, "f.txt", "line 5", "line 5"), "identical")


def test_edit_non_utf8_file(ws: Workspace, root: Path) -> None:
    (root / "f.bin").write_bytes(b"caf\xe9 line 5\n")

    assert_error(edit(ws, "f.bin", "line 5", "x"), "not UTF-8")
    assert (root / "f.bin").read_bytes() == b"caf\xe9 line 5\n"


def test_edit_missing_file(ws: Workspace) -> None:
    assert_error(edit(ws, "nope.txt", "a", "b"), "does not exist", "write_file")


def test_edit_refuses_escapes_links_and_git(ws: Workspace, root: Path, outside: Path) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "alias.txt").symlink_to(root / "real.txt")
    (root / "real.txt").write_text("TOP\n")
    (root / ".git").mkdir()
    (root / ".git/config").write_text("TOP\n")

    assert_error(edit(ws, "../outside/secret.txt", "TOP", "x"), "outside the workspace")
    assert_error(edit(ws, "link.txt", "TOP", "x"), "outside the workspace")
    assert_error(edit(ws, "alias.txt", "TOP", "x"), "symbolic link")
    assert_error(edit(ws, ".git/config", "TOP", "x"), ".git")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert (root / "real.txt").read_text() == "TOP\n"


def test_edit_deleting_the_last_line(ws: Workspace, root: Path) -> None:
    (root / "f.txt").write_text("a\nb\n")

    out = edit(ws, "f.txt", "b\n", "")

    assert (root / "f.txt").read_text() == "a\n"
    assert out.text.splitlines() == [
        "Edited f.txt; line 1 changed. Lines 1-1 now read:",
        "1\ta",
    ]


# ---------------------------------------------------------------- bash


def test_bash_captures_stdout_stderr_and_exit_code(ws: Workspace, sandbox: Sandbox) -> None:
    out = run(
        ws,
        sandbox,
        *python("import sys; print('to out'); print('to err', file=sys.stderr); exit(3)"),
    )

    assert out.is_error
    assert out.text == "exit code 3\n--- stdout ---\nto out\n--- stderr ---\nto err"


def test_bash_success_runs_in_cwd(ws: Workspace, sandbox: Sandbox, root: Path) -> None:
    (root / "sub").mkdir()

    out = run(ws, sandbox, *python("import os; print(os.getcwd())"), cwd="sub")

    assert not out.is_error
    assert out.text == f"exit code 0\n--- stdout ---\n{root / 'sub'}"


def test_bash_no_output(ws: Workspace, sandbox: Sandbox) -> None:
    assert run(ws, sandbox, *python("pass")).text == "exit code 0\n(no output)"


def test_bash_metacharacters_stay_literal(ws: Workspace, sandbox: Sandbox, root: Path) -> None:
    literal = "a; touch pwned && $(touch pwned2) `touch pwned3` | cat > out"

    out = run(ws, sandbox, "echo", literal)

    assert out.text == f"exit code 0\n--- stdout ---\n{literal}"
    assert list(root.iterdir()) == []


def test_bash_refuses_cwd_outside(ws: Workspace, sandbox: Sandbox, outside: Path) -> None:
    assert_error(run(ws, sandbox, "pwd", cwd=".."), "outside the workspace")
    assert_error(run(ws, sandbox, "pwd", cwd=str(outside)), "outside the workspace")
    assert_error(run(ws, sandbox, "pwd", cwd="missing"), "not an existing directory")


def _alive(pid: int) -> bool:
    """Whether `pid` runs; a zombie nobody reaped (as under a container's init) counts as dead."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # No /proc: ask the kernel.
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def test_bash_timeout_kills_grandchildren(ws: Workspace, root: Path, sandbox: Sandbox) -> None:
    # The grandchild would write its file two seconds in, long after the 1 s timeout.
    code = """
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c",
            "import time; time.sleep(2); open('grandchild.txt', 'w').write('alive')"])
        time.sleep(60)
    """
    started = time.monotonic()

    out = run(ws, sandbox, *python(code), timeout_s=1)

    assert time.monotonic() - started < 10
    assert_error(out, "timeout of 1 s", "killed")
    time.sleep(2.5)
    assert not (root / "grandchild.txt").exists()


def test_bash_timeout_when_a_background_child_keeps_the_output_open(ws: Workspace) -> None:
    code = """
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    """
    out = run(ws, UNCONFINED, *python(code), timeout_s=1)

    assert_error(out, "The program exited, but processes it started kept its output open")


@pytest.mark.needs_bwrap
def test_bash_in_the_sandbox_what_a_command_started_dies_when_it_exits(
    ws: Workspace, root: Path
) -> None:
    code = """
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c",
            "import time; time.sleep(2); open('orphan.txt', 'w').write('alive')"])
    """
    started = time.monotonic()

    out = run(ws, SANDBOXED, *python(code), timeout_s=30)

    assert out.text == "exit code 0\n(no output)"
    assert time.monotonic() - started < 5
    time.sleep(2.5)
    assert not (root / "orphan.txt").exists()


def test_bash_output_cap_keeps_head_and_tail(ws: Workspace, sandbox: Sandbox) -> None:
    code = "import sys; sys.stdout.write('HEAD' + 'x' * 100_000 + 'TAIL')"

    out = run(ws, sandbox, *python(code), output_cap=1000)

    assert not out.is_error
    body = out.text.split("--- stdout ---\n")[1]
    assert body.startswith("HEAD")
    assert body.endswith("TAIL")
    assert "[… 99008 bytes cut …]" in body
    assert len(out.text) < 1100


def test_bash_output_cap_is_shared_by_both_streams(ws: Workspace, sandbox: Sandbox) -> None:
    code = "import sys; sys.stdout.write('o' * 5000); sys.stderr.write('short')"

    out = run(ws, sandbox, *python(code), output_cap=1000)

    assert "--- stderr ---\nshort" in out.text
    assert "[… 4005 bytes cut …]" in out.text


def test_bash_environment_is_minimal(
    ws: Workspace, sandbox: Sandbox, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEEL_SECRET_PROBE", "x")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leak")
    code = """
        import os
        print(os.environ.get("KEEL_SECRET_PROBE"))
        print(" ".join(sorted(os.environ)))
        print(os.environ["HOME"])
    """
    out = run(ws, sandbox, *python(code))

    lines = out.text.splitlines()
    assert lines[2] == "None"
    assert set(lines[3].split()) <= {"PATH", "HOME", "LANG"}
    assert lines[4] == str(root)
    assert "sk-leak" not in out.text


def test_bash_finds_programs_beside_this_python(ws: Workspace, sandbox: Sandbox) -> None:
    out = run(ws, sandbox, Path(sys.executable).name, "-c", "import sys; print(sys.executable)")

    assert out.text == f"exit code 0\n--- stdout ---\n{sys.executable}"


def test_bash_missing_program(ws: Workspace, sandbox: Sandbox) -> None:
    assert_error(run(ws, sandbox, "keel-no-such-program", "--help"), "not found on PATH")
    assert_error(run(ws, sandbox, "./no-such-script"), "does not exist")


def test_bash_file_that_is_not_executable(ws: Workspace, sandbox: Sandbox, root: Path) -> None:
    (root / "script.py").write_text("print(1)\n")

    assert_error(run(ws, sandbox, "./script.py"), "not an executable program")


def test_bash_reports_the_killing_signal(ws: Workspace, sandbox: Sandbox) -> None:
    out = run(ws, sandbox, *python("import os, signal; os.kill(os.getpid(), signal.SIGTERM)"))

    assert out.is_error
    assert out.text.startswith("exit code -15 (killed by SIGTERM)")
