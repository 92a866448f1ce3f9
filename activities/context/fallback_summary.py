"""A summary Keel writes from its own records when the model's summary fails.

Compaction asks the model to summarise; a provider that keeps failing, or answers
with nothing usable, must not end a long review. This summary is built from what
the conversation holds, deterministically: the task (the run's input), every file
a `read_file` call read or a sub-agent reported reading, the files listed (by
`list_files`, a plan or the previous summary) and not yet read, every line that cites
a `path:line` (the model's notes, the sub-agents' answers, the previous summary), and
what to do next. It keeps the sections the model's summary has, so the model reads
it the same way.
"""

from __future__ import annotations

import re

from keel.workflows.context.budget import CHARS_PER_TOKEN, ContextItem, Summary

__all__ = ["fallback_summary"]

# A `path:line` citation, as findings are written (`pkg/a.py:12`).
_CITATION = re.compile(r"[\w./-]+\.\w+:\d+")
_HEADING = re.compile(r"^#+\s*(.+?)\s*$")
_LISTED = re.compile(r"^\s*[-*]\s+(\S+)\s*$")
_GROUPED = re.compile(r"^\s*-\s+(\S+/):\s+(.+)$")
_LISTING = re.compile(r"^(\S+) \(\d+ bytes\)$")
# Headings under which a text lists files that were read, or are still to read.
_READ_SECTIONS = ("files covered", "files read", "files reviewed")
_TO_READ_SECTIONS = ("files not yet read", "plan", "files to read")


def fallback_summary(
    items: list[ContextItem], previous: Summary | None, *, reason: str, room_tokens: int
) -> str:
    """The summary of `items` (and of `previous`), in about `room_tokens` at most."""
    task = next(
        (
            str(i.message.get("content") or "")
            for i in items
            if i.step == 0 and i.message.get("role") == "user"
        ),
        "",
    )
    texts = [previous.content] if previous is not None else []
    files: list[str] = []
    known: list[str] = []
    for item in items:
        role = item.message.get("role")
        content = str(item.message.get("content") or "")
        if role == "tool" and item.tool == "read_file" and not content.startswith("Error"):
            path = _path_of(item.arguments)
            if path and path not in files:
                files.append(path)
        elif role == "tool" and item.tool == "list_files":
            known += [m[1] for line in content.splitlines() if (m := _LISTING.match(line))]
        elif item.step > 0 and (role == "assistant" or item.tool == "task"):
            texts.append(content)
    for text in texts:
        files += [f for f in _files_under(text, _READ_SECTIONS) if f not in files]
        known += _files_under(text, _TO_READ_SECTIONS)
    unread = [f for f in dict.fromkeys(known) if f not in files]
    findings = list(dict.fromkeys(line for text in texts for line in _citations(text)))
    head = [
        "## Task\n" + (task.strip() or "(the run's input)"),
        "## Files covered\n" + ("\n".join(f"- {f}" for f in files) or "- none yet"),
    ]
    tail = [
        "## Open questions\n- none recorded",
        "## Files not yet read\n" + ("\n".join(f"- {f}" for f in unread) or "- none known"),
        "## Next steps\n- go on with the task where the conversation left off",
        f"(Keel wrote this summary from its records: {reason})",
    ]
    budget = room_tokens * CHARS_PER_TOKEN - sum(len(t) + 2 for t in (*head, *tail))
    kept = _within(findings, budget)
    if len(kept) < len(findings):
        kept.append(f"- … {len(findings) - len(kept)} more in the stored conversation")
    section = "## Findings\n" + ("\n".join(kept) or "- none recorded")
    return "\n\n".join([*head, section, *tail])


def _path_of(arguments: str) -> str:
    found = re.search(r'"path"\s*:\s*"([^"]+)"', arguments)
    return found[1] if found else ""


def _files_under(text: str, headings: tuple[str, ...]) -> list[str]:
    """Paths under one of `headings`: one a line, or a directory's on one line."""
    found: list[str] = []
    section = ""
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            section = heading[1].lower()
            continue
        if not section.startswith(headings):
            continue
        grouped = _GROUPED.match(line)
        if grouped:
            found += [grouped[1] + name for name in grouped[2].split()]
        elif (listed := _LISTED.match(line)) and listed[1] != "none":
            found.append(listed[1])
    return found


def _citations(text: str) -> list[str]:
    """Every line citing a `path:line`, as a list item."""
    lines = []
    for line in text.splitlines():
        if _CITATION.search(line):
            body = line.strip().lstrip("-* ").strip()
            lines.append(f"- {body}")
    return lines


def _within(lines: list[str], budget_chars: int) -> list[str]:
    kept: list[str] = []
    used = 0
    for line in lines:
        used += len(line) + 1
        if used > budget_chars:
            break
        kept.append(line)
    return kept
