"""The read-only workspace tools: read_file, list_files, search_code, and the workspace fence."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from keel.activities.tools import file_tools
from keel.activities.tools.file_tools import (
    LONG_LINE,
    ToolOutput,
    list_files,
    read_file,
    search_code,
    search_code_python,
)
from keel.activities.tools.workspace import PathEscapeError, Workspace
from keel.workflows.gate.tool_specs import ListFilesArgs, ReadFileArgs, SearchCodeArgs

HAS_RIPGREP = file_tools.ripgrep_path() is not None

Search = Callable[..., ToolOutput]


def _python(ws: Workspace, args: SearchCodeArgs, max_bytes: int = 262_144) -> ToolOutput:
    return search_code(ws, args, max_bytes, use_ripgrep=False)


def _ripgrep(ws: Workspace, args: SearchCodeArgs, max_bytes: int = 262_144) -> ToolOutput:
    return search_code(ws, args, max_bytes, use_ripgrep=True)


BACKENDS = [
    pytest.param(_python, id="python"),
    pytest.param(
        _ripgrep,
        id="ripgrep",
        marks=pytest.mark.skipif(not HAS_RIPGREP, reason="ripgrep (rg) is not installed"),
    ),
]


def write(root: Path, relative: str, content: str | bytes) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace, holding a secret the tools must never reveal."""
    directory = tmp_path / "outside"
    write(directory, "secret.txt", "TOP SECRET\n")
    return directory


@pytest.fixture
def root(tmp_path: Path) -> Path:
    directory = tmp_path / "ws"
    directory.mkdir()
    return directory


@pytest.fixture
def ws(root: Path) -> Workspace:
    return Workspace(root)


# ---------------------------------------------------------------- Workspace


def test_workspace_root_must_be_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not an existing directory"):
        Workspace(tmp_path / "missing")
    with pytest.raises(ValueError, match="not an existing directory"):
        Workspace(write(tmp_path, "file.txt", "x"))


def test_resolve_keeps_paths_inside(ws: Workspace, root: Path) -> None:
    write(root, "src/a.py", "x")
    assert ws.resolve("src/a.py") == root.resolve() / "src" / "a.py"
    assert ws.resolve("src/../src/a.py") == root.resolve() / "src" / "a.py"
    assert ws.resolve(str(root / "src" / "a.py")) == root.resolve() / "src" / "a.py"
    assert ws.relative(ws.resolve(".")) == "."
    assert ws.relative(ws.resolve("src/a.py")) == "src/a.py"


@pytest.mark.parametrize("path", ["..", "../x", "src/../../x", "/etc/passwd", "/"])
def test_resolve_refuses_paths_outside(ws: Workspace, path: str) -> None:
    with pytest.raises(PathEscapeError, match="outside the workspace; use a path relative"):
        ws.resolve(path)


def test_resolve_refuses_nul_bytes(ws: Workspace) -> None:
    with pytest.raises(PathEscapeError, match="NUL byte"):
        ws.resolve("a\0b")


def test_relative_refuses_a_path_outside(ws: Workspace, outside: Path) -> None:
    with pytest.raises(PathEscapeError):
        ws.relative(outside)


# ---------------------------------------------------------------- read_file


def numbered(count: int) -> str:
    return "".join(f"line {n}\n" for n in range(1, count + 1))


def test_read_whole_file(ws: Workspace, root: Path) -> None:
    write(root, "a.txt", "alpha\nbeta\n")
    out = read_file(ws, ReadFileArgs(path="a.txt"))
    assert out == ToolOutput("a.txt (lines 1-2 of 2)\n1\talpha\n2\tbeta", seen=("a.txt",))


def test_read_numbers_lines_without_padding(ws: Workspace, root: Path) -> None:
    # Padded numbers ("     7\t") were a fifth of a read's tokens on short lines.
    write(root, "a.txt", numbered(120))
    lines = read_file(ws, ReadFileArgs(path="a.txt", start_line=9, end_line=100)).text.split("\n")
    assert lines[1:3] == ["9\tline 9", "10\tline 10"]
    assert lines[-1] == "100\tline 100"


def test_read_line_range(ws: Workspace, root: Path) -> None:
    write(root, "a.txt", numbered(10))
    out = read_file(ws, ReadFileArgs(path="a.txt", start_line=3, end_line=5))
    assert out.text.splitlines() == [
        "a.txt (lines 3-5 of 10)",
        "3\tline 3",
        "4\tline 4",
        "5\tline 5",
    ]


def test_read_end_line_past_the_end_is_clamped(ws: Workspace, root: Path) -> None:
    write(root, "a.txt", numbered(4))
    out = read_file(ws, ReadFileArgs(path="a.txt", start_line=3, end_line=99))
    assert out.text.splitlines() == ["a.txt (lines 3-4 of 4)", "3\tline 3", "4\tline 4"]


def test_read_last_line_without_newline_and_crlf(ws: Workspace, root: Path) -> None:
    write(root, "a.txt", b"one\r\ntwo")
    out = read_file(ws, ReadFileArgs(path="a.txt"))
    assert out.text.splitlines()[1:] == ["1\tone", "2\ttwo"]


def test_read_invalid_utf8_is_replaced(ws: Workspace, root: Path) -> None:
    write(root, "a.txt", b"caf\xe9\n")
    assert "caf\ufffd" in read_file(ws, ReadFileArgs(path="a.txt")).text


def test_read_start_beyond_end(ws: Workspace, root: Path) -> None:
    write(root, "a.txt", numbered(3))
    out = read_file(ws, ReadFileArgs(path="a.txt", start_line=4))
    assert out.is_error
    assert out.text == (
        "Error: start_line 4 is beyond the end of 'a.txt', which has 3 lines; "
        "use a start_line from 1 to 3."
    )


def test_read_end_before_start(ws: Workspace, root: Path) -> None:
    write(root, "a.txt", numbered(9))
    out = read_file(ws, ReadFileArgs(path="a.txt", start_line=5, end_line=2))
    assert out.is_error
    assert out.text.startswith("Error: end_line (2) is before start_line (5);")


def test_read_empty_file(ws: Workspace, root: Path) -> None:
    write(root, "empty.txt", "")
    assert read_file(ws, ReadFileArgs(path="empty.txt")) == ToolOutput(
        "empty.txt (empty file)", seen=("empty.txt",)
    )


def test_read_truncates_at_a_line_boundary_and_says_where_to_resume(
    ws: Workspace, root: Path
) -> None:
    write(root, "big.txt", numbered(100))
    out = read_file(ws, ReadFileArgs(path="big.txt"), max_bytes=100)
    lines = out.text.splitlines()
    # Each entry is "{n}\tline {n}" plus a newline: 9 bytes for n < 10, 11 for 10-99.
    assert lines[0] == "big.txt (lines 1-10 of 100)"
    assert lines[1:11] == [f"{n}\tline {n}" for n in range(1, 11)]
    assert lines[11] == (
        "[output truncated at 100 bytes; call read_file again with start_line=11 to continue]"
    )
    assert not out.is_error

    resumed = read_file(ws, ReadFileArgs(path="big.txt", start_line=8, end_line=9), max_bytes=100)
    assert resumed.text.splitlines() == [
        "big.txt (lines 8-9 of 100)",
        "8\tline 8",
        "9\tline 9",
    ]


def test_read_cuts_a_single_line_longer_than_the_cap(ws: Workspace, root: Path) -> None:
    write(root, "wide.txt", "x" * 500 + "\nshort\n")
    out = read_file(ws, ReadFileArgs(path="wide.txt"), max_bytes=50)
    header, shown, footer = out.text.splitlines()
    assert header == "wide.txt (lines 1-1 of 2)"
    assert shown == "1\t" + "x" * 48
    assert footer == (
        "[line 1 is longer than 50 bytes and was cut; "
        "call read_file again with start_line=2 to continue]"
    )


def test_read_refuses_binary(ws: Workspace, root: Path) -> None:
    write(root, "blob.bin", b"PK\x03\x04\x00\x00data")
    out = read_file(ws, ReadFileArgs(path="blob.bin"))
    assert out.is_error
    assert (
        out.text == "Error: 'blob.bin' looks like a binary file; read_file only reads text files."
    )


def test_read_missing_file(ws: Workspace) -> None:
    out = read_file(ws, ReadFileArgs(path="nope.py"))
    assert out.is_error
    assert out.text == (
        "Error: File 'nope.py' does not exist; use list_files to find the right path."
    )
    assert out.seen == ()


def test_read_directory(ws: Workspace, root: Path) -> None:
    (root / "src").mkdir()
    out = read_file(ws, ReadFileArgs(path="src"))
    assert out.is_error
    assert "is a directory" in out.text and "list_files" in out.text


@pytest.mark.parametrize("path", ["../outside/secret.txt", "src/../../outside/secret.txt"])
def test_read_refuses_dotdot_escape(ws: Workspace, outside: Path, path: str) -> None:
    out = read_file(ws, ReadFileArgs(path=path))
    assert out.is_error
    assert out.text == (
        f"Error: Path '{path}' is outside the workspace; use a path relative to the workspace root."
    )


def test_read_refuses_absolute_path_outside(ws: Workspace, outside: Path) -> None:
    out = read_file(ws, ReadFileArgs(path=str(outside / "secret.txt")))
    assert out.is_error
    assert "outside the workspace" in out.text
    assert "TOP SECRET" not in out.text


def test_read_allows_absolute_path_inside(ws: Workspace, root: Path) -> None:
    write(root, "src/a.py", "print('hi')\n")
    out = read_file(ws, ReadFileArgs(path=str(root / "src" / "a.py")))
    assert not out.is_error
    assert out.text.splitlines()[0] == "src/a.py (lines 1-1 of 1)"
    assert out.seen == ("src/a.py",)


def test_read_refuses_nul_byte(ws: Workspace) -> None:
    # The arguments model refuses it first (see the gate's tests); the tool holds too.
    out = read_file(ws, ReadFileArgs.model_construct(path="a\0b", start_line=1, end_line=None))
    assert out.is_error
    assert "NUL byte" in out.text


def test_read_refuses_symlinked_file_escaping(ws: Workspace, root: Path, outside: Path) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    out = read_file(ws, ReadFileArgs(path="link.txt"))
    assert out.is_error
    assert "outside the workspace" in out.text
    assert "TOP SECRET" not in out.text


def test_read_refuses_symlinked_directory_escaping(
    ws: Workspace, root: Path, outside: Path
) -> None:
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    out = read_file(ws, ReadFileArgs(path="linkdir/secret.txt"))
    assert out.is_error
    assert "outside the workspace" in out.text


def test_read_allows_symlink_inside(ws: Workspace, root: Path) -> None:
    write(root, "real/a.txt", "hello\n")
    (root / "alias.txt").symlink_to(root / "real" / "a.txt")
    (root / "aliasdir").symlink_to(root / "real", target_is_directory=True)
    for path in ("alias.txt", "aliasdir/a.txt"):
        out = read_file(ws, ReadFileArgs(path=path))
        assert out.text == "real/a.txt (lines 1-1 of 1)\n1\thello"
        assert out.seen == ("real/a.txt",)


def test_read_symlink_loop_is_an_error(ws: Workspace, root: Path) -> None:
    (root / "a").symlink_to(root / "b")
    (root / "b").symlink_to(root / "a")
    out = read_file(ws, ReadFileArgs(path="a"))
    assert out.is_error


def test_read_unreadable_file_is_an_error(ws: Workspace, root: Path) -> None:
    path = write(root, "locked.txt", "x\n")
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as a user who can read any file")
        out = read_file(ws, ReadFileArgs(path="locked.txt"))
    finally:
        path.chmod(0o644)
    assert out.is_error
    assert "Could not access 'locked.txt'" in out.text


# ---------------------------------------------------------------- list_files


@pytest.fixture
def project(root: Path) -> Path:
    write(root, "README.md", "# demo\n")
    write(root, "setup.py", "x = 1\n")
    write(root, "src/app.py", "def main():\n    return 1\n")
    write(root, "src/pkg/util.py", "def helper():\n    pass\n")
    write(root, "src/pkg/data.json", "{}\n")
    write(root, ".github/ci.yml", "on: push\n")
    write(root, ".git/config", "[core]\n")
    write(root, "node_modules/lib/index.js", "def main\n")
    write(root, "src/node_modules/dep.py", "def main():\n")
    write(root, "src/__pycache__/app.cpython-311.pyc", b"\x00\x01")
    write(root, "build/out.py", "def main():\n")
    return root


def listed(out: ToolOutput) -> list[str]:
    return [line.split(" (")[0] for line in out.text.splitlines()]


def test_list_all_files_skipping_vcs_and_dependencies(ws: Workspace, project: Path) -> None:
    out = list_files(ws, ListFilesArgs())
    assert listed(out) == [
        ".github/ci.yml",
        "README.md",
        "setup.py",
        "src/app.py",
        "src/pkg/data.json",
        "src/pkg/util.py",
    ]
    assert out.seen == tuple(listed(out))
    assert "src/app.py (25 bytes)" in out.text.splitlines()


def test_list_glob_semantics(ws: Workspace, project: Path) -> None:
    assert listed(list_files(ws, ListFilesArgs(pattern="**/*.py"))) == [
        "setup.py",
        "src/app.py",
        "src/pkg/util.py",
    ]
    assert listed(list_files(ws, ListFilesArgs(pattern="*.py"))) == ["setup.py"]
    assert listed(list_files(ws, ListFilesArgs(pattern="src/*/*.json"))) == ["src/pkg/data.json"]
    assert listed(list_files(ws, ListFilesArgs(pattern="**/*.{md,json}"))) == [
        "README.md",
        "src/pkg/data.json",
    ]


def test_list_under_a_path(ws: Workspace, project: Path) -> None:
    out = list_files(ws, ListFilesArgs(path="src", pattern="*.py"))
    assert listed(out) == ["src/app.py"]
    assert listed(list_files(ws, ListFilesArgs(path="src/pkg"))) == [
        "src/pkg/data.json",
        "src/pkg/util.py",
    ]


def test_list_inside_a_skipped_directory_when_asked_for_it(ws: Workspace, project: Path) -> None:
    assert listed(list_files(ws, ListFilesArgs(path="node_modules"))) == [
        "node_modules/lib/index.js"
    ]


def test_list_no_match(ws: Workspace, project: Path) -> None:
    out = list_files(ws, ListFilesArgs(pattern="**/*.rs"))
    assert out == ToolOutput("No files match '**/*.rs' under '.'.")


def test_list_cap(ws: Workspace, root: Path) -> None:
    for n in range(10):
        write(root, f"f{n}.txt", "x")
    out = list_files(ws, ListFilesArgs(), max_entries=7)
    lines = out.text.splitlines()
    assert lines[:7] == [f"f{n}.txt (1 bytes)" for n in range(7)]
    assert lines[7] == "… 3 more not shown; narrow the pattern or path."
    assert len(out.seen) == 7


def test_list_errors(ws: Workspace, project: Path) -> None:
    missing = list_files(ws, ListFilesArgs(path="nope"))
    assert missing.is_error and "does not exist" in missing.text
    a_file = list_files(ws, ListFilesArgs(path="setup.py"))
    assert a_file.is_error and "use read_file" in a_file.text
    escape = list_files(ws, ListFilesArgs(path=".."))
    assert escape.is_error and "outside the workspace" in escape.text
    for pattern in ("../*", "/etc/*", ""):
        bad = list_files(ws, ListFilesArgs(pattern=pattern))
        assert bad.is_error and "relative glob" in bad.text


def test_list_skips_symlinks_that_escape(ws: Workspace, root: Path, outside: Path) -> None:
    write(root, "real.txt", "x")
    (root / "inside.txt").symlink_to(root / "real.txt")
    (root / "secret.txt").symlink_to(outside / "secret.txt")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    assert listed(list_files(ws, ListFilesArgs())) == ["inside.txt", "real.txt"]
    escape = list_files(ws, ListFilesArgs(path="linkdir"))
    assert escape.is_error and "outside the workspace" in escape.text


# ---------------------------------------------------------------- search_code


@pytest.mark.parametrize("search", BACKENDS)
def test_search_regex(search: Search, ws: Workspace, project: Path) -> None:
    out = search(ws, SearchCodeArgs(pattern=r"def \w+\("))
    assert out.text.splitlines() == [
        "src/app.py:1: def main():",
        "src/pkg/util.py:1: def helper():",
    ]
    assert out.seen == ("src/app.py", "src/pkg/util.py")
    assert not out.is_error


@pytest.mark.parametrize("search", BACKENDS)
def test_search_sorted_by_path_then_line(search: Search, ws: Workspace, root: Path) -> None:
    write(root, "b.py", "hit\nmiss\nhit\n")
    write(root, "a/z.py", "hit\n")
    write(root, "a.py", "hit\n")
    out = search(ws, SearchCodeArgs(pattern="hit"))
    assert out.text.splitlines() == ["a.py:1: hit", "a/z.py:1: hit", "b.py:1: hit", "b.py:3: hit"]


@pytest.mark.parametrize("search", BACKENDS)
def test_search_glob_filter(search: Search, ws: Workspace, root: Path) -> None:
    write(root, "a.py", "needle\n")
    write(root, "a.md", "needle\n")
    write(root, "sub/b.py", "needle\n")
    write(root, "sub/deeper/c.py", "needle\n")

    def paths(glob: str, path: str = ".") -> list[str]:
        out = search(ws, SearchCodeArgs(pattern="needle", glob=glob, path=path))
        return [line.split(":")[0] for line in out.text.splitlines()]

    assert paths("*.py") == ["a.py", "sub/b.py", "sub/deeper/c.py"]
    assert paths("*.{md,txt}") == ["a.md"]
    assert paths("sub/*.py") == ["sub/b.py"]
    assert paths("sub/**/*.py") == ["sub/b.py", "sub/deeper/c.py"]
    assert paths("*.py", path="sub") == ["sub/b.py", "sub/deeper/c.py"]
    assert paths("deeper/*.py", path="sub") == ["sub/deeper/c.py"]
    assert paths("!*.py") == ["a.md"]
    assert paths("!deeper") == ["a.md", "a.py", "sub/b.py"]


@pytest.mark.parametrize("search", BACKENDS)
def test_search_caps_results(search: Search, ws: Workspace, root: Path) -> None:
    write(root, "a.txt", "x\n" * 30)
    out = search(ws, SearchCodeArgs(pattern="x", max_results=5))
    lines = out.text.splitlines()
    assert lines[:5] == [f"a.txt:{n}: x" for n in range(1, 6)]
    assert lines[5] == (
        "… 25 more matches not shown; narrow the search with `path`, `glob` "
        "or a more specific pattern."
    )
    assert len(lines) == 6


@pytest.mark.parametrize("search", BACKENDS)
def test_search_caps_bytes(search: Search, ws: Workspace, root: Path) -> None:
    write(root, "a.txt", "x\n" * 30)
    out = search(ws, SearchCodeArgs(pattern="x"), 40)
    lines = out.text.splitlines()
    assert lines[:3] == [f"a.txt:{n}: x" for n in range(1, 4)]  # 11 bytes each with newline
    assert lines[3].startswith("… 27 more matches not shown")


def test_search_invalid_regex(ws: Workspace, root: Path) -> None:
    write(root, "a.py", "x\n")
    for search in (search_code, search_code_python):
        out = search(ws, SearchCodeArgs(pattern="foo(bar"))
        assert out.is_error
        assert out.text.startswith(
            "Error: The pattern is not a valid regular expression "
            "(missing ), unterminated subpattern at position 3)"
        )


@pytest.mark.parametrize("search", BACKENDS)
def test_search_shell_metacharacters_are_only_a_regex(
    search: Search, ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(root)
    write(root, "a.sh", "echo $(touch pwned)\necho `touch pwned`; rm -rf x\n--version\n")
    for pattern in ("$(touch pwned)", "`touch pwned`; touch pwned", "x; touch pwned", "|| true"):
        out = search(ws, SearchCodeArgs(pattern=pattern))
        assert not out.is_error, out.text
    assert not list(root.rglob("pwned*"))
    assert search(ws, SearchCodeArgs(pattern=r"\$\(touch pwned\)")).text == (
        "a.sh:1: echo $(touch pwned)"
    )
    # A pattern that looks like an option is still a pattern.
    assert search(ws, SearchCodeArgs(pattern="--version")).text == "a.sh:3: --version"


@pytest.mark.parametrize("search", BACKENDS)
def test_search_skips_binary_big_and_vendored_files(
    search: Search, ws: Workspace, project: Path
) -> None:
    write(project, "blob.bin", b"def main():\n\x00")
    write(project, "late.bin", b"def main():\n" + b"a" * 70_000 + b"\x00")
    write(project, "huge.py", "def main():\n" + "#" * (3 * 1024 * 1024))
    out = search(ws, SearchCodeArgs(pattern="def main"))
    assert out.text == "src/app.py:1: def main():"


@pytest.mark.parametrize("search", BACKENDS)
def test_search_skips_symlinks_that_escape(
    search: Search, ws: Workspace, root: Path, outside: Path
) -> None:
    write(root, "a.txt", "SECRET? no\n")
    (root / "secret.txt").symlink_to(outside / "secret.txt")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    out = search(ws, SearchCodeArgs(pattern="SECRET"))
    assert out.text == "a.txt:1: SECRET? no"
    escape = search(ws, SearchCodeArgs(pattern="SECRET", path="linkdir"))
    assert escape.is_error and "outside the workspace" in escape.text


@pytest.mark.parametrize("search", BACKENDS)
def test_search_long_lines_and_crlf(search: Search, ws: Workspace, root: Path) -> None:
    write(root, "a.txt", b"hit\r\n" + b"hit" + b"x" * 297 + b"\nhit" + b"y" * 296 + b"\n")
    out = search(ws, SearchCodeArgs(pattern="hit"))
    assert out.text.splitlines() == [
        "a.txt:1: hit",
        f"a.txt:2: {LONG_LINE}",
        "a.txt:3: hit" + "y" * 296,
    ]


@pytest.mark.parametrize("search", BACKENDS)
def test_search_a_single_file_and_no_match(search: Search, ws: Workspace, project: Path) -> None:
    assert search(ws, SearchCodeArgs(pattern="helper", path="src/pkg/util.py")).text == (
        "src/pkg/util.py:1: def helper():"
    )
    assert search(ws, SearchCodeArgs(pattern="zzz", glob="*.py")) == ToolOutput(
        "No lines match /zzz/ under '.' (files matching '*.py')."
    )


def test_search_errors(ws: Workspace, project: Path) -> None:
    missing = search_code_python(ws, SearchCodeArgs(pattern="x", path="nope"))
    assert missing.is_error and "does not exist" in missing.text
    escape = search_code_python(ws, SearchCodeArgs(pattern="x", path="../"))
    assert escape.is_error and "outside the workspace" in escape.text


def test_search_forcing_missing_ripgrep_is_an_error(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_tools, "ripgrep_path", lambda: None)
    assert search_code(ws, SearchCodeArgs(pattern="x"), use_ripgrep=True).is_error
    assert not search_code(ws, SearchCodeArgs(pattern="x")).is_error


@pytest.mark.skipif(not HAS_RIPGREP, reason="ripgrep (rg) is not installed")
def test_search_ripgrep_falls_back_on_syntax_it_lacks(ws: Workspace, root: Path) -> None:
    write(root, "a.py", "foobar\nfoobaz\n")
    assert _ripgrep(ws, SearchCodeArgs(pattern="foo(?=bar)")).text == "a.py:1: foobar"


@pytest.mark.skipif(not HAS_RIPGREP, reason="ripgrep (rg) is not installed")
@pytest.mark.parametrize(
    "args",
    [
        SearchCodeArgs(pattern="def"),
        SearchCodeArgs(pattern="^$"),
        SearchCodeArgs(pattern="e", max_results=3),
        SearchCodeArgs(pattern=r"\w+", glob="*.py"),
        SearchCodeArgs(pattern="main", path="src"),
        SearchCodeArgs(pattern="main", glob="!*.py"),
        SearchCodeArgs(pattern="caf", glob="**/*.txt"),
        SearchCodeArgs(pattern="hidden"),
        SearchCodeArgs(pattern="def", path="node_modules"),
        SearchCodeArgs(pattern="def", glob="src/*.py"),
        SearchCodeArgs(pattern="def", path="src/pkg/util.py"),
        SearchCodeArgs(pattern="-- x", glob="*.txt"),
    ],
    ids=str,
)
def test_ripgrep_and_python_agree(ws: Workspace, project: Path, args: SearchCodeArgs) -> None:
    write(project, "notes/latin1.txt", b"caf\xe9\n\ncaf\r\n")
    write(project, ".hidden/h.py", "hidden = 1\n")
    write(project, "notes/long.txt", "def " + "e" * 400 + "\n-- x\n")
    (project / "src" / "alias.py").symlink_to(project / "src" / "app.py")
    assert _ripgrep(ws, args) == search_code_python(ws, args)
