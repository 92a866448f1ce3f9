"""The tools an agent uses to change its workspace: write and edit files, run programs.

Every function takes the model's arguments as they came and never raises for bad input:
problems come back as a `ToolOutput` whose text starts with "Error: ".
"""

from __future__ import annotations

import contextlib
import os
import secrets
import selectors
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from keel.activities.tools.file_tools import ToolOutput, numbered
from keel.activities.tools.sandbox import LaunchReport, Sandbox
from keel.activities.tools.workspace import PathEscapeError, Workspace
from keel.workflows.gate.tool_specs import BashArgs, EditFileArgs, WriteFileArgs

__all__ = ["SAFE_PATH", "Begin", "bash", "command_env", "edit_file", "write_file"]

Begin = Callable[[], bool]
"""Called right before a tool's first effect, so a crash after it is known to be "started".

False: another attempt of the same call has taken it over, and this one must not act."""

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
"""Where commands find programs, after the directory of the Python running Keel."""

EDIT_CONTEXT_LINES = 3
MAX_SHOWN_COLUMNS = 300
READ_CHUNK_BYTES = 65_536
KILL_GRACE_SECONDS = 2.0
"""How long to keep reading a killed command's pipes for its last words."""
REPORT_BYTES = 4096
TAKEN_OVER = (
    "another attempt of this call has taken it over, so this one did not act; "
    "its outcome is recorded there."
)


def _go() -> bool:
    return True


# ---------------------------------------------------------------- write_file


def write_file(ws: Workspace, args: WriteFileArgs, *, begin: Begin = _go) -> ToolOutput:
    """Create or overwrite a file with `args.content`, atomically, creating parent directories."""
    data = _encode(args.content, "content")
    if isinstance(data, ToolOutput):
        return data
    target = _writable_target(ws, args.path)
    if isinstance(target, ToolOutput):
        return target
    rel = ws.relative(target)
    existed = target.exists()
    if not begin():
        return _error(TAKEN_OVER)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _replace_atomically(target, data)
    except (FileExistsError, NotADirectoryError):
        return _error(
            f"A parent of '{args.path}' is a file, not a directory; "
            "choose a path whose parent directories are directories."
        )
    except OSError as exc:
        return _os_error(args.path, exc)
    verb = "Overwrote" if existed else "Created"
    return ToolOutput(f"{verb} {rel} ({_count(len(data), 'byte')}).", seen=(rel,))


# ---------------------------------------------------------------- edit_file


def edit_file(ws: Workspace, args: EditFileArgs, *, begin: Begin = _go) -> ToolOutput:
    """Replace the single occurrence of `args.old_string` in a UTF-8 file with `args.new_string`."""
    if args.old_string == args.new_string:
        return _error(
            "old_string and new_string are identical, so nothing would change; "
            "give the replacement text as new_string."
        )
    target = _writable_target(ws, args.path)
    if isinstance(target, ToolOutput):
        return target
    rel = ws.relative(target)
    if not target.exists():
        return _error(
            f"File '{args.path}' does not exist; use write_file to create it, "
            "or list_files to find the right path."
        )
    try:
        raw = target.read_bytes()
    except OSError as exc:
        return _os_error(args.path, exc)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _error(
            f"'{rel}' is not UTF-8 text; edit_file only changes UTF-8 text files, "
            "so use write_file to replace it whole."
        )
    found = _occurrences(text, args.old_string)
    if not found:
        hint = ""
        if "\r\n" in text and "\n" in args.old_string and "\r\n" not in args.old_string:
            hint = " (the file has CRLF line endings)"
        return _error(
            f"old_string was not found in '{rel}'{hint}; read the file again and copy the "
            "text to replace exactly, including whitespace and indentation."
        )
    if len(found) > 1:
        return _error(
            f"old_string occurs {len(found)} times in '{rel}'; add surrounding lines to "
            "old_string so that it matches exactly one place."
        )
    at = found[0]
    new_text = text[:at] + args.new_string + text[at + len(args.old_string) :]
    data = _encode(new_text, "new_string")
    if isinstance(data, ToolOutput):
        return data
    if not begin():
        return _error(TAKEN_OVER)
    try:
        _replace_atomically(target, data)
    except OSError as exc:
        return _os_error(args.path, exc)
    return ToolOutput(_edit_summary(rel, new_text, at, args.new_string), seen=(rel,))


def _occurrences(text: str, needle: str) -> list[int]:
    """Start of every occurrence of `needle`, overlapping ones included: they are ambiguous too."""
    starts = []
    at = text.find(needle)
    while at != -1:
        starts.append(at)
        at = text.find(needle, at + 1)
    return starts


def _edit_summary(rel: str, text: str, at: int, inserted: str) -> str:
    """Which lines changed, and those lines with a few around them, numbered as read_file does."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if not lines:
        return f"Edited {rel}; the file is now empty."
    first = min(text.count("\n", 0, at) + 1, len(lines))
    last = text.count("\n", 0, at + len(inserted) - 1) + 1 if inserted else first
    changed = f"line {first}" if first == last else f"lines {first}-{last}"
    start = max(1, first - EDIT_CONTEXT_LINES)
    end = min(len(lines), last + EDIT_CONTEXT_LINES)
    shown = [numbered(n, _clip(lines[n - 1])) for n in range(start, end + 1)]
    return "\n".join([f"Edited {rel}; {changed} changed. Lines {start}-{end} now read:", *shown])


def _clip(line: str) -> str:
    line = line.removesuffix("\r")
    if len(line) <= MAX_SHOWN_COLUMNS:
        return line
    return f"{line[:MAX_SHOWN_COLUMNS]}… [{len(line) - MAX_SHOWN_COLUMNS} more characters]"


# ---------------------------------------------------------------- writing safely


def _writable_target(ws: Workspace, given: str) -> Path | ToolOutput:
    """The real path `given` names, if a tool may replace a regular file there."""
    try:
        path = ws.resolve(given)
        lexical = ws.root / given
        # Replacing a link would break it, and writing through one writes somewhere unasked.
        if lexical.is_symlink():
            return _error(
                f"'{given}' is a symbolic link; tools do not write through links. "
                "Write to the file it points to instead."
            )
        rel = ws.relative(path)
        if _in_git_dir(rel) or (
            lexical.is_relative_to(ws.root) and _in_git_dir(lexical.relative_to(ws.root))
        ):
            return _error(
                f"'{given}' is inside a .git directory, which tools may not change; "
                "change files of the working tree instead."
            )
        if path.is_dir():
            return _error(
                f"'{given}' is a directory; give the path of a file inside it, such as "
                f"'{given.rstrip('/')}/name.txt'."
            )
        if path.exists() and not path.is_file():
            return _error(f"'{given}' is not a regular file; choose another path.")
    except PathEscapeError as exc:
        return _error(str(exc))
    except OSError as exc:
        return _os_error(given, exc)
    return path


def _in_git_dir(rel: str | Path) -> bool:
    return any(part.lower() == ".git" for part in Path(rel).parts)


def _replace_atomically(path: Path, data: bytes) -> None:
    """Write `data` to a temporary file beside `path`, then rename it over `path`.

    Readers see the old content or the new, never half; an existing file keeps its mode.
    """
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    fd, temp = _create_temp(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _create_temp(path: Path) -> tuple[int, Path]:
    # os.open applies the umask to 0o666, so a new file gets the mode any editor would give it.
    while True:
        temp = path.with_name(f".{path.name[:80]}.{secrets.token_hex(4)}.keel-tmp")
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
            return os.open(temp, flags, 0o666), temp
        except FileExistsError:
            continue


def _encode(text: str, field: str) -> bytes | ToolOutput:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _error(
            f"{field} contains characters that cannot be written as UTF-8 "
            "(unpaired surrogates); remove them and try again."
        )


# ---------------------------------------------------------------- bash


def command_env(ws: Workspace) -> dict[str, str]:
    """The whole environment of a command: nothing of the worker's (API keys, DSNs) leaks in."""
    return {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{SAFE_PATH}",
        "HOME": str(ws.root),
        "LANG": "C.UTF-8",
    }


def bash(
    ws: Workspace,
    args: BashArgs,
    *,
    sandbox: Sandbox,
    network: bool = False,
    begin: Begin = _go,
    output_cap: int = 65_536,
) -> ToolOutput:
    """Run `args.command` without a shell inside the workspace; its exit code and capped output.

    The command runs in `sandbox`, which owns every process it starts (see
    `activities.tools.sandbox`), and in a process group of its own, which is killed when
    it times out or, after it exits, to stop anything it left running.
    """
    if sandbox.problem is not None:
        return _error(sandbox.problem)
    if any("\0" in arg for arg in args.command):
        return _error("The command contains a NUL byte; remove it from the arguments.")
    try:
        cwd = ws.resolve(args.cwd)
    except PathEscapeError as exc:
        return _error(str(exc))
    if not cwd.is_dir():
        return _error(
            f"Working directory '{args.cwd}' is not an existing directory; "
            "use list_files to find one, or omit cwd to run at the workspace root."
        )
    env = command_env(ws)
    report_r, report_w = os.pipe()
    try:
        launch = sandbox.launch(
            args.command, workspace=ws.root, cwd=cwd, network=network, report_fd=report_w
        )
        if not begin():
            return _error(TAKEN_OVER)
        try:
            proc = subprocess.Popen(
                launch.argv,
                shell=False,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=(report_w,) if launch.reports else (),
            )
        except OSError as exc:
            return _not_started(launch.argv[0], env["PATH"], exc)
        finally:
            os.close(report_w)
            report_w = -1
        out, err = _Capture(output_cap), _Capture(output_cap)
        exited_first = False
        try:
            deadline = time.monotonic() + args.timeout_s
            with selectors.DefaultSelector() as selector:
                assert proc.stdout is not None and proc.stderr is not None
                selector.register(proc.stdout, selectors.EVENT_READ, out)
                selector.register(proc.stderr, selectors.EVENT_READ, err)
                timed_out = not _drain(selector, deadline) or not _exited(proc, deadline)
                if timed_out:
                    exited_first = _exited(proc, 0.0)
                    _kill(proc)
                    _drain(selector, time.monotonic() + KILL_GRACE_SECONDS)
        finally:
            _kill(proc)
            proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        report = _read_report(report_r) if launch.reports else None
    finally:
        os.close(report_r)
        if report_w != -1:
            os.close(report_w)
    if report is not None and report.errno is not None:
        return _not_started(args.command[0], env["PATH"], OSError(report.errno, ""))
    sections = _sections(out, err, output_cap)
    if timed_out:
        why = (
            "The program exited, but processes it started kept its output open"
            if exited_first
            else "The command was still running"
        )
        head = (
            f"Error: {why} after the timeout of {args.timeout_s} s, so it was killed with "
            "everything it started; raise timeout_s (at most 1800) or run something quicker."
        )
        return ToolOutput("\n".join([head, *sections]), is_error=True)
    if launch.reports and (report is None or report.returncode is None):
        head = (
            f"Error: the sandbox could not run the command (bwrap exited with "
            f"{proc.returncode}); this is a problem of the worker's setup, not of the command."
        )
        return ToolOutput("\n".join([head, *sections]), is_error=True)
    returncode = report.returncode if report is not None else proc.returncode
    assert returncode is not None
    head = f"exit code {returncode}{_signal_note(returncode)}"
    if out.binary or err.binary:
        head += "\n(bytes that are not UTF-8 text, such as NUL, are shown as \\xNN escapes)"
    return ToolOutput("\n".join([head, *sections]), is_error=returncode != 0)


def _read_report(fd: int) -> LaunchReport | None:
    """The launcher's report, written before it exited (so before bwrap did)."""
    os.set_blocking(fd, False)
    try:
        return LaunchReport.parse(os.read(fd, REPORT_BYTES))
    except BlockingIOError:
        return None


def _drain(selector: selectors.BaseSelector, deadline: float) -> bool:
    """Read every registered pipe into its capture until all close (True) or time is up."""
    while selector.get_map():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        for key, _ in selector.select(remaining):
            chunk = os.read(key.fd, READ_CHUNK_BYTES)
            if chunk:
                key.data.add(chunk)
            else:
                selector.unregister(key.fileobj)
    return True


def _exited(proc: subprocess.Popen[bytes], deadline: float) -> bool:
    """Whether the command has exited by `deadline`, leaving it unreaped where possible.

    An unreaped child keeps its pid, so its process group id cannot pass to another
    program before we kill the group. Python 3.11 on macOS lacks waitid: there we reap.
    """
    if not hasattr(os, "waitid"):
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(max(0.0, deadline - time.monotonic()))
        return proc.returncode is not None
    delay = 0.001
    while True:
        if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.05)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's process group, grandchildren included, and the command itself."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.returncode is None:  # Once reaped, its pid may belong to another program.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGKILL)  # In case it moved itself to another group.


def _not_started(program: str, path: str, exc: OSError) -> ToolOutput:
    if isinstance(exc, FileNotFoundError):
        if "/" in program:
            return _error(
                f"Program '{program}' does not exist; give its path relative to cwd, "
                "and use list_files to check it."
            )
        return _error(
            f"Program '{program}' was not found on PATH ({path}); check its name, "
            "or give its path such as ./script relative to cwd."
        )
    if isinstance(exc, PermissionError):
        return _error(
            f"'{program}' is not an executable program; run it through its interpreter, "
            'e.g. ["python", "script.py"].'
        )
    reason = exc.strerror or type(exc).__name__
    return _error(
        f"'{program}' could not be started ({reason}); run it through its interpreter, "
        'e.g. ["python", "script.py"].'
    )


def _signal_note(returncode: int) -> str:
    if returncode >= 0:
        return ""
    try:
        return f" (killed by {signal.Signals(-returncode).name})"
    except ValueError:
        return f" (killed by signal {-returncode})"


class _Capture:
    """The first and last bytes of one output stream, so memory stays bounded by the cap."""

    def __init__(self, cap: int) -> None:
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.binary = False
        """Whether what was rendered held bytes that are not text (shown escaped)."""

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        del self.tail[: max(0, len(self.tail) - self.tail_cap)]

    def render(self, budget: int) -> str:
        """The stream as text within `budget` bytes: head and tail, with what was cut noted."""
        kept = bytes(self.head + self.tail)  # The whole stream when total <= cap >= budget.
        if self.total <= budget:
            return self._decode(kept)
        first = budget // 2
        last = budget - first
        cut = self.total - first - last
        return (
            f"{self._decode(kept[:first])}\n[… {_count(cut, 'byte')} cut …]\n"
            f"{self._decode(kept[len(kept) - last :])}"
        )

    def _decode(self, raw: bytes) -> str:
        """UTF-8 text as it is; NUL and undecodable bytes as `\\xNN`, so nothing is lost."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", "backslashreplace")
            self.binary = True
        if "\0" in text:
            text = text.replace("\0", "\\x00")
            self.binary = True
        return text


def _sections(out: _Capture, err: _Capture, cap: int) -> list[str]:
    """stdout and stderr sections sharing `cap` bytes; a short stream lends its share."""
    if out.total + err.total <= cap:
        budgets = out.total, err.total
    elif out.total <= cap // 2:
        budgets = out.total, cap - out.total
    elif err.total <= cap - cap // 2:
        budgets = cap - err.total, err.total
    else:
        budgets = cap // 2, cap - cap // 2
    sections = [
        f"--- {name} ---\n" + capture.render(budget).removesuffix("\n")
        for name, capture, budget in (("stdout", out, budgets[0]), ("stderr", err, budgets[1]))
        if capture.total
    ]
    return sections or ["(no output)"]


# ---------------------------------------------------------------- errors


def _error(sentence: str) -> ToolOutput:
    return ToolOutput(f"Error: {sentence}", is_error=True)


def _os_error(given: str, exc: OSError) -> ToolOutput:
    reason = exc.strerror or type(exc).__name__
    return _error(f"Could not write '{given}' ({reason}); check the path with list_files.")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
