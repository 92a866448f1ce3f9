"""What the scripted model knows of a request: its size, and a reviewer that reads it.

Two pieces the scripted server (`worker.scripted_llm`) uses when a script asks:

- `request_tokens`: a deterministic token count of a chat request, the way the
  server measures it against its context window — one token per 4 characters of
  the JSON of the messages and of the tool schemas (rounded up), plus 3 tokens a
  message. Keel's own estimate counts differently (text, not JSON), so its
  calibration against the reported `prompt_tokens` has something to correct.
- `reviewer_reply`: a model that follows no script. It decides its next call from
  what is in the request alone, as a real model does: list the files, read the ones
  whose reading is not in its context, note every line marked `# BUG:` it sees,
  and write a report naming the files and findings it knows of. What it knows comes
  only from the request — earlier tool outputs, its own earlier notes, a summary a
  compaction wrote — so a context that lost something shows in the report.

Everything is a pure function of the request, so a retried request gets the same
reply.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "COMPACTION_CUE",
    "ReviewerReply",
    "asks_for_summary",
    "message_tokens",
    "request_tokens",
    "reviewer_reply",
    "tools_tokens",
]

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 3
# The reviewer recognises a request to summarise by this phrase in the last user message
# (Keel's compaction prompt says it; any prompt that does will do).
COMPACTION_CUE = "summarise the conversation so far"
# Files read per step: one keeps each step's new output small against a small window.
READS_PER_STEP = 1

_LISTING_LINE = re.compile(r"^(\S+) \(\d+ bytes\)$")
_READ_HEADER = re.compile(r"^(\S+) \(lines (\d+)-(\d+) of (\d+)\)")
_NUMBERED_LINE = re.compile(r"^\s*(\d+)\t(.*)$")
_BUG = re.compile(r"#\s*BUG:\s*(.+?)\s*$")
_FINDING_LINE = re.compile(r"^- ([^\s:]+):(\d+): (.+)$")
_PATH_LINE = re.compile(r"^- ([^\s:]+)$")
# A directory's files on one line, as the reviewer writes its plan and summaries.
_GROUP_LINE = re.compile(r"^- (\S+/): (.+)$")
_CONTINUE = re.compile(r"start_line=(\d+)")


def message_tokens(message: object) -> int:
    """Tokens the scripted server counts for one message."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    return MESSAGE_OVERHEAD_TOKENS + math.ceil(len(text) / CHARS_PER_TOKEN)


def tools_tokens(tools: object) -> int:
    """Tokens the scripted server counts for a request's tool schemas."""
    if not tools:
        return 0
    text = json.dumps(tools, ensure_ascii=False, separators=(",", ":"))
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def request_tokens(body: dict[str, Any]) -> int:
    """The size of a chat request as the scripted server counts it."""
    messages = body.get("messages")
    counted = sum(message_tokens(m) for m in messages) if isinstance(messages, list) else 0
    return counted + tools_tokens(body.get("tools"))


@dataclass
class ReviewerReply:
    """The reviewer's next message: text, and the tool calls it makes (name, arguments)."""

    content: str
    tool_calls: list[tuple[str, dict[str, object]]] = field(default_factory=list)


@dataclass
class _Knowledge:
    """What the request tells the reviewer: files known, files read, findings."""

    task: str = ""
    listed: list[str] = field(default_factory=list)
    covered: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    findings: dict[tuple[str, int], str] = field(default_factory=dict)
    # Findings in outputs that arrived after the reviewer's last message: noted next.
    fresh: dict[tuple[str, int], str] = field(default_factory=dict)
    # (path, start_line) of a read to continue: the newest output said there is more.
    continue_at: tuple[str, int] | None = None

    def list_file(self, path: str) -> None:
        if path not in self.listed:
            self.listed.append(path)

    def skip(self, path: str) -> None:
        self.list_file(path)
        if path not in self.unreadable:
            self.unreadable.append(path)

    def cover(self, path: str) -> None:
        self.list_file(path)
        if path not in self.covered:
            self.covered.append(path)

    def find(self, path: str, line: int, text: str, *, fresh: bool = False) -> None:
        key = (path, line)
        if key not in self.findings:
            self.findings[key] = text
            if fresh:
                self.fresh[key] = text


def reviewer_reply(messages: list[object]) -> ReviewerReply:
    """The reviewer's answer to a request carrying `messages`."""
    known = _read_context([m for m in messages if isinstance(m, dict)])
    if asks_for_summary(messages):
        return ReviewerReply(content=_summary(known))
    notes = _notes(known.fresh)
    if not known.listed:
        return ReviewerReply(content="Listing the workspace first.", tool_calls=[_list_files()])
    if known.continue_at is not None:
        path, start = known.continue_at
        call = ("read_file", {"path": path, "start_line": start})
        return ReviewerReply(content=notes or f"Reading on in {path}.", tool_calls=[call])
    unread = [p for p in known.listed if p not in known.covered and p not in known.unreadable]
    if unread:
        calls: list[tuple[str, dict[str, object]]] = [
            ("read_file", {"path": p}) for p in unread[:READS_PER_STEP]
        ]
        plan = "" if _has_plan(messages) else _plan(known.listed)
        return ReviewerReply(
            content="\n\n".join(t for t in (notes, plan) if t) or "Reading.", tool_calls=calls
        )
    return ReviewerReply(content=_report(known))


def _read_context(messages: list[dict[str, Any]]) -> _Knowledge:
    known = _Knowledge()
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    last_assistant = max(
        (i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1
    )
    for index, message in enumerate(messages):
        role = message.get("role")
        text = _text(message.get("content"))
        if role == "user" and not known.task and not text.startswith("[Summary"):
            known.task = text.strip().splitlines()[0] if text.strip() else ""
        if role in ("user", "assistant"):
            _read_notes(known, text)
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except ValueError:
                    arguments = {}
                calls[str(call.get("id"))] = (str(function.get("name")), arguments)
        if role == "tool":
            name, arguments = calls.get(str(message.get("tool_call_id")), ("", {}))
            _read_output(known, name, arguments, text, fresh=index > last_assistant)
    return known


def _read_notes(known: _Knowledge, text: str) -> None:
    """Files and findings that the reviewer's notes, plan or a summary name."""
    section = ""
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip().lower()
            continue
        finding = _FINDING_LINE.match(line)
        if finding:
            known.find(finding[1], int(finding[2]), finding[3])
            continue
        group = _GROUP_LINE.match(line)
        listed = _PATH_LINE.match(line)
        if group is not None:
            paths = [group[1] + name for name in group[2].split()]
        elif listed is not None:
            paths = [listed[1]]
        else:
            continue
        for path in paths:
            if section.startswith("files covered") or section.startswith("files reviewed"):
                known.cover(path)
            elif section.startswith("files not readable"):
                known.skip(path)
            elif section.startswith("plan") or section.startswith("files not yet read"):
                known.list_file(path)


def _read_output(
    known: _Knowledge, name: str, arguments: dict[str, Any], text: str, *, fresh: bool
) -> None:
    if text.startswith("Error:"):
        path = str(arguments.get("path") or "")
        if name == "read_file" and path:
            known.skip(path)  # binary or gone: reading it again would not help
        return
    if name == "list_files":
        for line in text.splitlines():
            match = _LISTING_LINE.match(line)
            if match:
                known.list_file(match[1])
        return
    if name != "read_file":
        return
    path = str(arguments.get("path") or "")
    if not path:
        return
    known.cover(path)  # a stub of a pruned output still says the file was read
    header = _READ_HEADER.match(text)
    if header is None:
        return
    for line in text.splitlines()[1:]:
        numbered = _NUMBERED_LINE.match(line)
        bug = _BUG.search(numbered[2]) if numbered else None
        if numbered and bug:
            known.find(path, int(numbered[1]), bug[1], fresh=fresh)
    tail = text[-400:]
    more = _CONTINUE.search(tail)
    cut = "[Keel: output cut" in tail or int(header[3]) < int(header[4])
    if fresh and more and cut:
        known.continue_at = (path, int(more[1]))


def asks_for_summary(messages: list[object]) -> bool:
    """Whether the request asks for a summary of the conversation (a compaction)."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return COMPACTION_CUE in _text(message.get("content")).lower()
        if isinstance(message, dict) and message.get("role") in ("assistant", "tool"):
            return False
    return False


def _has_plan(messages: list[object]) -> bool:
    return any(
        isinstance(m, dict)
        and m.get("role") in ("assistant", "user")
        and (
            "## Plan" in _text(m.get("content"))
            or "## Files not yet read" in _text(m.get("content"))
        )
        for m in messages
    )


def _list_files() -> tuple[str, dict[str, object]]:
    return ("list_files", {"pattern": "**/*"})


def _notes(findings: dict[tuple[str, int], str]) -> str:
    if not findings:
        return ""
    lines = [f"- {path}:{line}: {text}" for (path, line), text in sorted(findings.items())]
    return "## Noted\n" + "\n".join(lines)


def _plan(listed: list[str]) -> str:
    return "## Plan\n" + _grouped(listed)


def _grouped(paths: list[str]) -> str:
    """Paths one directory a line (`- dir/: a.py b.py`): far fewer tokens than one a line."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        head, _, name = path.rpartition("/")
        groups.setdefault(f"{head}/" if head else "", []).append(name)
    lines = []
    for head, names in groups.items():
        if head and all(" " not in n for n in names):
            lines.append(f"- {head}: {' '.join(names)}")
        else:
            lines += [f"- {head}{n}" for n in names]
    return "\n".join(lines)


def _findings_section(known: _Knowledge) -> str:
    lines = [f"- {p}:{n}: {t}" for (p, n), t in sorted(known.findings.items())]
    return "## Findings\n" + ("\n".join(lines) if lines else "- none found")


def _summary(known: _Knowledge) -> str:
    unread = [p for p in known.listed if p not in known.covered and p not in known.unreadable]
    parts = [
        f"## Task\n{known.task or 'Review the workspace.'}",
        "## Files covered\n" + _grouped(known.covered),
        "## Files not readable\n" + (_grouped(known.unreadable) or "(none)"),
        _findings_section(known),
        "## Open questions\n- none",
        "## Files not yet read\n" + _grouped(unread),
        "## Next steps\n" + ("- read the files not yet read" if unread else "- write the report"),
    ]
    return "\n\n".join(parts)


def _report(known: _Knowledge) -> str:
    return "\n\n".join(
        [
            f"## Summary\nReviewed {len(known.covered)} files; {len(known.findings)} findings.",
            "## Files reviewed\n" + "\n".join(f"- {p}" for p in known.covered),
            "## Files not readable\n" + ("\n".join(f"- {p}" for p in known.unreadable) or "(none)"),
            _findings_section(known),
            "## Tests\n- not assessed by the scripted reviewer",
            _findings_block(known),
        ]
    )


def _findings_block(known: _Knowledge) -> str:
    """The findings for machines (docs/findings.md); the scripted reviewer rates all low."""
    items = [
        {"file": path, "line": line, "severity": "low", "title": text[:300], "detail": ""}
        for (path, line), text in sorted(known.findings.items())
    ]
    return "```findings\n" + json.dumps(items, indent=1) + "\n```"


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""
