"""What the scripted model knows of a request: its size, and a reviewer that reads it.

Two pieces the scripted server (`keel.worker.scripted.llm`) uses when a script asks:

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

  It delegates as the built-in `review` agent's prompt says: when the request offers
  the `task` tool and the listed files add up to more than `OWN_BYTES`, it hands parts
  of about `PART_BYTES` or `PART_FILES` (neighbouring paths) to `explore` sub-agents,
  `PARTS_PER_REPLY` a reply, notes what their answers cover after each round, and
  reports every file a
  sub-agent read and, under `## Not covered`, every other one with the reason. A
  sub-agent's conversation (its prompt starts with `PART_CUE`) reads the files its
  prompt names and answers with its findings, `## Files read` and `## Not read`.
  When the task names a file for the report ("write the report to REVIEW.md") and
  `write_file` is offered, it writes the report there before answering, which is an
  acting call a person must approve, and says in its answer whether the write took.

Everything is a pure function of the request, so a retried request gets the same
reply.
"""

from __future__ import annotations

import collections
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "COMPACTION_CUE",
    "PART_CUE",
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
# Files read per step: one keeps each step's new output small against a small window,
# and each step's history at one model call and one tool call.
READS_PER_STEP = 1
# What the review prompt says: up to this much source the lead reads itself...
OWN_BYTES = 100_000
# ...beyond it, parts of about this size (and at most this many files) go to
# sub-agents, this many parts a reply. Large parts spread a child's fixed cost (its
# start, opening and end in two histories) over more steps.
PART_BYTES = 120_000
PART_FILES = 15
PARTS_PER_REPLY = 8
SUBAGENT = "explore"
# A sub-agent's prompt starts with this, so the reviewer knows which side it plays.
PART_CUE = "REVIEW-PART"
# A file whose size the context no longer holds (a summary names files, not sizes).
UNKNOWN_FILE_BYTES = 9_000
# What a delegating lead's summary says it does next, so it goes on delegating.
DELEGATE_CUE = "hand the files not yet read to sub-agents"
NO_REPORT = "no sub-agent reported reading it"
OUT_OF_TIME = "the run's steps or tool calls ran out before it was read"

# Paths may hold spaces (`docs/my file.md`), never a colon, and never start or end with one.
_PATH = r"[^\s:](?:[^:\n]*[^\s:])?"
_LISTING_LINE = re.compile(rf"^({_PATH}) \((\d+) bytes\)$")
_READ_HEADER = re.compile(r"^(.+?) \(lines (\d+)-(\d+) of (\d+)\)$", re.MULTILINE)
_NUMBERED_LINE = re.compile(r"^\s*(\d+)\t(.*)$")
_BUG = re.compile(r"#\s*BUG:\s*(.+?)\s*$")
_FINDING_LINE = re.compile(rf"^- ({_PATH}):(\d+): (.+)$")
_PATH_LINE = re.compile(rf"^- ({_PATH})$")
_REASON_LINE = re.compile(rf"^- ({_PATH}): (.+)$")
# A directory's files on one line, as the reviewer writes its plan and summaries.
_GROUP_LINE = re.compile(r"^- (\S+/): (.+)$")
_CONTINUE = re.compile(r"start_line=(\d+)")
# A task that names where the report goes: "... write the report to REVIEW.md".
_REPORT_FILE = re.compile(r"\b(?:to|into|in)\s+`?([\w.-][\w./-]*\.(?:md|txt))`?", re.IGNORECASE)


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
    sizes: dict[str, int] = field(default_factory=dict)
    covered: list[str] = field(default_factory=list)
    # Files nobody will read, with the reason (binary, a sub-agent failed...).
    unreadable: dict[str, str] = field(default_factory=dict)
    findings: dict[tuple[str, int], str] = field(default_factory=dict)
    # Findings and coverage in outputs that arrived after the reviewer's last message:
    # noted next, so pruning or a summary keeps them.
    fresh: dict[tuple[str, int], str] = field(default_factory=dict)
    fresh_covered: list[str] = field(default_factory=list)
    fresh_unreadable: dict[str, str] = field(default_factory=dict)
    # (path, start_line) of a read to continue: the newest output said there is more.
    continue_at: tuple[str, int] | None = None
    # Files handed to sub-agents whose answers are in (a stub of a pruned one counts),
    # and how many times each was handed out.
    delegated: list[str] = field(default_factory=list)
    handed: collections.Counter[str] = field(default_factory=collections.Counter)
    delegating: bool = False
    # A sub-agent's conversation: the files its prompt names.
    part: bool = False
    # The report's `write_file` call, once answered: its path and what the tool said.
    written: tuple[str, str] | None = None
    # An ordinary model's report: no files reviewed, no files not covered.
    plain: bool = False
    # A part Keel planned: its prompt asks for a findings block too.
    keel_part: bool = False

    def list_file(self, path: str, size: int | None = None) -> None:
        if path not in self.listed:
            self.listed.append(path)
        if size is not None:
            self.sizes[path] = size

    def skip(self, path: str, reason: str = "not readable", *, fresh: bool = False) -> None:
        self.list_file(path)
        if path not in self.unreadable and path not in self.covered:
            self.unreadable[path] = reason
            if fresh:
                self.fresh_unreadable[path] = reason

    def cover(self, path: str, *, fresh: bool = False) -> None:
        self.list_file(path)
        self.unreadable.pop(path, None)
        if path not in self.covered:
            self.covered.append(path)
            if fresh:
                self.fresh_covered.append(path)

    def find(self, path: str, line: int, text: str, *, fresh: bool = False) -> None:
        key = (path, line)
        if key not in self.findings:
            self.findings[key] = text
            if fresh:
                self.fresh[key] = text

    def unread(self) -> list[str]:
        return [p for p in self.listed if p not in self.covered and p not in self.unreadable]


def reviewer_reply(
    messages: list[object],
    tools: list[str] | None = None,
    *,
    may_call: bool = True,
    plain: bool = False,
) -> ReviewerReply:
    """The reviewer's answer to a request carrying `messages` and offering `tools`.

    With `may_call` false (`tool_choice: none`, a run out of steps or calls) it answers
    at once with what it knows, and says which files it had no time to read. A `plain`
    reviewer is an ordinary model: it never delegates and its report is a summary and
    findings, with no account of which files it read.
    """
    if plain:
        tools = [t for t in tools or [] if t != "task"]
    known = _read_context([m for m in messages if isinstance(m, dict)])
    known.plain = plain
    if asks_for_summary(messages):
        return ReviewerReply(content=_summary(known))
    if not may_call:
        for path in known.unread():
            known.skip(path, OUT_OF_TIME if path not in known.delegated else NO_REPORT)
        return ReviewerReply(content=_part_answer(known) if known.part else _report(known))
    notes = _notes(known)
    if not known.listed and not known.part:
        return ReviewerReply(content="Listing the workspace first.", tool_calls=[_list_files()])
    if known.continue_at is not None:
        path, start = known.continue_at
        call = ("read_file", {"path": path, "start_line": start})
        return ReviewerReply(content=notes or f"Reading on in {path}.", tool_calls=[call])
    if not known.part and _delegates(known, tools):
        return _delegate(known, notes, plan=not _has_plan(messages))
    unread = known.unread()
    if unread:
        calls: list[tuple[str, dict[str, object]]] = [
            ("read_file", {"path": p}) for p in unread[:READS_PER_STEP]
        ]
        plan = "" if known.part or _has_plan(messages) else _plan(known.listed)
        return ReviewerReply(
            content="\n\n".join(t for t in (notes, plan) if t) or "Reading.", tool_calls=calls
        )
    if known.part:
        return ReviewerReply(content=_part_answer(known))
    return _final(known, tools)


def _final(known: _Knowledge, tools: list[str] | None) -> ReviewerReply:
    """The report; first written to the file the task names, when it names one and
    `write_file` is offered (an acting call, so a person approves it)."""
    report = _report(known)
    target = _REPORT_FILE.search(known.task)
    if target is None or "write_file" not in (tools or []):
        return ReviewerReply(content=report)
    if known.written is None:
        call = ("write_file", {"path": target[1], "content": report + "\n"})
        return ReviewerReply(content=f"Writing the report to {target[1]}.", tool_calls=[call])
    path, output = known.written
    if output.startswith("Error:"):
        outcome = f"The report is not in {path}: {output.splitlines()[0][len('Error:') :].strip()}"
    else:
        outcome = f"The report is also in {path}."
    return ReviewerReply(content=f"{report}\n\n{outcome}")


def _delegates(known: _Knowledge, tools: list[str] | None) -> bool:
    """What the review prompt says: more source than the lead can hold goes to sub-agents."""
    if "task" not in (tools or []):
        return False
    total = sum(known.sizes.get(p, UNKNOWN_FILE_BYTES) for p in known.listed)
    return known.delegating or total > OWN_BYTES


def _delegate(known: _Knowledge, notes: str, *, plan: bool) -> ReviewerReply:
    """The next round of parts for sub-agents, or the merged report once all are back."""
    # As the prompt says: files a sub-agent had no time for go to another one, once.
    again = [
        p for p, reason in known.unreadable.items() if reason == OUT_OF_TIME and known.handed[p] < 2
    ]
    for path in again:
        del known.unreadable[path]
    waiting = [p for p in known.unread() if p not in known.delegated or p in again]
    if not waiting:
        for path in known.unread():
            known.skip(path, NO_REPORT)
        return ReviewerReply(content=_report(known))
    parts = _split(waiting, known.sizes)[:PARTS_PER_REPLY]
    calls: list[tuple[str, dict[str, object]]] = [
        ("task", {"agent": SUBAGENT, "prompt": _part_prompt(part)}) for part in parts
    ]
    files = sum(len(p) for p in parts)
    head = f"Delegating {_count(len(parts), 'part')} ({_count(files, 'file')})."
    texts = (notes, _plan(known.listed) if plan else "", head)
    return ReviewerReply(content="\n\n".join(t for t in texts if t), tool_calls=calls)


def _part_prompt(part: list[str]) -> str:
    return (
        f"{PART_CUE}: review {_these(len(part))}; read every one of them. Report each "
        "finding as `- path:line: problem`, then `## Files read` and `## Not read` (with "
        "the reason for each).\n## Files to read\n" + _grouped(part)
    )


def _count(n: int, noun: str) -> str:
    """`1 file`, `2 files`: the reviewer's prose reads like a person's."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _these(n: int) -> str:
    return "this file" if n == 1 else f"these {n} files"


def _split(paths: list[str], sizes: dict[str, int]) -> list[list[str]]:
    """Neighbouring paths together, each up to `PART_BYTES` and `PART_FILES` (one at least)."""
    parts: list[list[str]] = []
    size = 0
    for path in paths:
        bytes_ = sizes.get(path, UNKNOWN_FILE_BYTES)
        if parts and size + bytes_ <= PART_BYTES and len(parts[-1]) < PART_FILES:
            parts[-1].append(path)
            size += bytes_
        else:
            parts.append([path])
            size = bytes_
    return parts


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
            known.keel_part = "\n## Files to read\n" in text and "`findings`" in text
            known.part = known.task.startswith(PART_CUE) or known.keel_part
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


def _read_notes(known: _Knowledge, text: str, *, fresh: bool = False) -> None:
    """Files and findings that notes, a plan, a summary or a sub-agent's answer name."""
    if DELEGATE_CUE in text:
        known.delegating = True
    section = ""
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip().lower()
            continue
        finding = _FINDING_LINE.match(line)
        if finding:
            known.find(finding[1], int(finding[2]), finding[3], fresh=fresh)
            continue
        if section.startswith(("not covered", "not read", "files not readable")):
            reason = _REASON_LINE.match(line)
            listed = _PATH_LINE.match(line)
            if reason is not None:
                known.skip(reason[1], reason[2], fresh=fresh)
            elif listed is not None and listed[1] != "none":
                known.skip(listed[1], "not read", fresh=fresh)
            continue
        for path in _paths(line):
            if section.startswith(("files covered", "files reviewed", "files read")):
                known.cover(path, fresh=fresh)
            elif section.startswith(("plan", "files not yet read", "files to read")):
                known.list_file(path)


def _paths(line: str) -> list[str]:
    """The paths of a `- path` line or of a directory's `- dir/: a.py b.py` line."""
    group = _GROUP_LINE.match(line)
    if group is not None:
        return [group[1] + name for name in group[2].split()]
    listed = _PATH_LINE.match(line)
    return [listed[1]] if listed is not None else []


def _read_output(
    known: _Knowledge, name: str, arguments: dict[str, Any], text: str, *, fresh: bool
) -> None:
    if name == "task":
        _read_answer(known, arguments, text, fresh=fresh)
        return
    if name == "write_file":
        known.written = (str(arguments.get("path") or ""), text or "Error: no answer")
        return
    if text.startswith("Error:"):
        path = str(arguments.get("path") or "")
        if name == "read_file" and path:
            known.skip(path, "not readable")  # binary or gone: reading it again would not help
        return
    if name == "list_files":
        for line in text.splitlines():
            match = _LISTING_LINE.match(line)
            if match:
                known.list_file(match[1], int(match[2]))
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


def _read_answer(known: _Knowledge, arguments: dict[str, Any], text: str, *, fresh: bool) -> None:
    """A sub-agent's answer: the files it read and its findings; a failure leaves its part."""
    known.delegating = True
    part = [p for line in str(arguments.get("prompt") or "").splitlines() for p in _paths(line)]
    for path in part:
        known.list_file(path)
        known.handed[path] += 1
        if path not in known.delegated:
            known.delegated.append(path)
    if text.startswith("Error:"):
        reason = "its sub-agent failed: " + text.splitlines()[0][len("Error:") :].strip()[:120]
        for path in part:
            known.skip(path, reason, fresh=fresh)
        return
    _read_notes(known, text, fresh=fresh)


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


def _notes(known: _Knowledge) -> str:
    """What arrived since the reviewer's last message, written down so it outlives pruning."""
    sections = []
    if known.fresh:
        lines = [f"- {p}:{n}: {t}" for (p, n), t in sorted(known.fresh.items())]
        sections.append("## Noted\n" + "\n".join(lines))
    if known.fresh_covered:
        sections.append("## Files reviewed\n" + _grouped(known.fresh_covered))
    if known.fresh_unreadable:
        sections.append("## Not covered\n" + _reasons(known.fresh_unreadable))
    return "\n\n".join(sections)


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


def _reasons(unreadable: dict[str, str]) -> str:
    return "\n".join(f"- {p}: {r}" for p, r in unreadable.items()) or "none"


def _findings_section(known: _Knowledge) -> str:
    lines = [f"- {p}:{n}: {t}" for (p, n), t in sorted(known.findings.items())]
    return "## Findings\n" + ("\n".join(lines) if lines else "- none found")


def _summary(known: _Knowledge) -> str:
    unread = known.unread()
    if known.delegating:
        # Answers are in for these; nobody will read them now.
        for path in [p for p in unread if p in known.delegated]:
            known.skip(path, NO_REPORT)
        unread = known.unread()
    if unread:
        next_step = f"- {DELEGATE_CUE}" if known.delegating else "- read the files not yet read"
    else:
        next_step = "- write the report"
    parts = [
        f"## Task\n{known.task or 'Review the workspace.'}",
        "## Files covered\n" + _grouped(known.covered),
        "## Not covered\n" + _reasons(known.unreadable),
        _findings_section(known),
        "## Open questions\n- none",
        "## Files not yet read\n" + _grouped(unread),
        "## Next steps\n" + next_step,
    ]
    return "\n\n".join(parts)


def _part_answer(known: _Knowledge) -> str:
    """A sub-agent's answer: findings, then the files it read and those it did not, and
    for a part Keel planned (its prompt asks), the findings block."""
    sections = [
        _findings_section(known),
        "## Files read\n" + _grouped(known.covered),
        "## Not read\n" + _reasons(known.unreadable),
    ]
    if known.keel_part:
        sections.append(_findings_block(known))
    return "\n\n".join(sections)


def _report(known: _Knowledge) -> str:
    if known.plain:
        return "\n\n".join(
            [
                f"## Summary\nThe review found {_count(len(known.findings), 'finding')}.",
                _findings_section(known),
                _findings_block(known),
            ]
        )
    return "\n\n".join(
        [
            f"## Summary\nReviewed {len(known.covered)} of {_count(len(known.listed), 'file')}; "
            f"{_count(len(known.findings), 'finding')}.",
            "## Files reviewed\n" + "\n".join(f"- {p}" for p in known.covered),
            "## Not covered\n" + _reasons(known.unreadable),
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
