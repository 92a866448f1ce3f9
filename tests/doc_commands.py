"""The `keel` commands the README and docs show, read from their shell blocks.

Only fenced blocks marked `bash`, `sh` or `shell` are read (and the `$ ` lines of
`console` blocks, the rest being output): prose, tables and other languages are not
commands. A command is found wherever `keel` is the program: after `&&`, `;` or `|`,
after `VAR=value` assignments, as `.venv/bin/keel`, and inside `$(...)`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELLS = {"bash", "sh", "shell", "console"}
_FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_SUBSTITUTION = re.compile(r"\$\((keel\b[^()]*)\)")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")"}
_REDIRECTIONS = {"<", ">", ">>", "2>", "2>&1"}


@dataclass(frozen=True)
class DocCommand:
    """One `keel` command as a page shows it."""

    page: str
    """The page, relative to the repository: `README.md`, `docs/cli.md`."""
    section: str
    """The `## ` heading it is under ("" before the first)."""
    line: str
    """The shell line it came from (continuations joined)."""
    args: tuple[str, ...]
    """Its arguments after `keel`."""

    def __str__(self) -> str:
        return f"{self.page} ({self.section or 'top'}): keel {shlex.join(self.args)}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def shell_lines(text: str) -> list[tuple[int, str]]:
    """(offset, line) of every command line of the page's shell blocks."""
    found = []
    for block in _FENCE.finditer(text):
        language = block[1].lower()
        if language not in SHELLS:
            continue
        body = block[2].replace("\\\n", " ")
        pending = ""
        for line in body.splitlines():
            if language == "console" and not pending:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            # A quoted argument may span lines: a command ends where its quotes close.
            pending = f"{pending}\n{line}" if pending else line
            if pending.strip() and _closed(pending):
                found.append((block.start(), pending.strip()))
                pending = ""
    return found


def _closed(line: str) -> bool:
    try:
        shlex.split(line, comments=True)
    except ValueError:
        return False
    return True


def _keel_args(words: list[str]) -> list[tuple[str, ...]]:
    """The argument lists of the `keel` commands among a line's words."""
    commands: list[tuple[str, ...]] = []
    simple: list[str] = []
    redirected = False
    for word in [*words, ";"]:
        if redirected:  # the file a redirection names is the shell's, not keel's
            redirected = False
        elif word in _REDIRECTIONS:
            redirected = True
        elif word in _SEPARATORS:
            while simple and _ASSIGNMENT.match(simple[0]):
                simple.pop(0)
            if simple and Path(simple[0]).name == "keel":
                commands.append(tuple(simple[1:]))
            simple = []
        else:
            simple.append(word)
    return commands


def keel_commands(page: Path) -> list[DocCommand]:
    text = page.read_text(encoding="utf-8")
    headings = [(m.start(), m[1]) for m in re.finditer(r"^## (.+)$", text, re.MULTILINE)]
    name = page.relative_to(ROOT).as_posix()
    found = []
    for offset, line in shell_lines(text):
        section = next((h for start, h in reversed(headings) if start < offset), "")
        inner = [m[1] for m in _SUBSTITUTION.finditer(line)]
        outer = _SUBSTITUTION.sub("SUBSTITUTED", line)
        for source in [outer, *inner]:
            lexer = shlex.shlex(source, posix=True, punctuation_chars=";&|()")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            for args in _keel_args(list(lexer)):
                found.append(DocCommand(name, section, line, args))
    return found


def all_keel_commands() -> list[DocCommand]:
    return [command for page in pages() for command in keel_commands(page)]
