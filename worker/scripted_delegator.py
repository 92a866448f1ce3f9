"""A scripted reviewer that delegates: the `review` agent's way with a large workspace.

A policy, not a script: each reply is decided from the request alone, as a real model
decides, so a retried request gets the same reply. It plays both sides of a delegated
review, told apart by the conversation's first user message:

- The lead lists the workspace; if the files add up to more than `own_bytes`, it splits
  them into parts of about `part_bytes` (neighbouring paths together) and hands each
  part to an `explore` sub-agent with one `task` call each, all in one reply. With the
  sub-agents' answers in, it writes the report: every file some sub-agent read, every
  finding they made, and under `## Not covered` each listed file nobody read.
- A sub-agent (its prompt starts with `PART_CUE`) reads the files its prompt names,
  `reads_per_step` at a time, notes every line marked `# BUG:` in its reply as it goes
  (so a pruned or compacted context keeps them), and answers with its findings,
  `## Files read` and `## Not read`.

What it knows comes only from the request, so a file or finding lost on the way
(a failed sub-agent, a truncated answer) shows in the report.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PART_CUE", "DelegatingReviewer", "Reply"]

PART_CUE = "REVIEW-PART"

_LISTING_LINE = re.compile(r"^(\S+) \((\d+) bytes\)$")
_READ_HEADER = re.compile(r"^(\S+) \(lines \d+-\d+ of \d+\)")
_NUMBERED_LINE = re.compile(r"^\s*(\d+)\t(.*)$")
_BUG = re.compile(r"#\s*BUG:\s*(.+?)\s*$")
_FINDING = re.compile(r"^- (\S+:\d+): (.+)$")
_PATH = re.compile(r"^- (\S+)$")


@dataclass
class Reply:
    """The next assistant message: text, and tool calls as (name, arguments)."""

    content: str
    tool_calls: list[tuple[str, dict[str, object]]] = field(default_factory=list)


@dataclass(frozen=True)
class DelegatingReviewer:
    """The policy's sizes: what the lead reads itself, and how large a part is."""

    own_bytes: int = 100_000
    part_bytes: int = 60_000
    reads_per_step: int = 5
    subagent: str = "explore"

    def reply(self, body: dict[str, Any]) -> Reply:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        first = next((m for m in messages if m.get("role") == "user"), {})
        if PART_CUE in _text(first.get("content")):
            return self._part(_text(first.get("content")), messages)
        return self._lead(messages)

    # -- the lead -----------------------------------------------------------------

    def _lead(self, messages: list[dict[str, Any]]) -> Reply:
        calls = _calls(messages)
        results = _results(messages)
        listing = next(
            (results[cid] for cid, (name, _) in calls.items() if name == "list_files"), None
        )
        if listing is None:
            return Reply("Listing the workspace first.", [("list_files", {"pattern": "**/*"})])
        files = _listed(listing)
        tasks = {cid: args for cid, (name, args) in calls.items() if name == "task"}
        if tasks:
            return self._merge(files, [results.get(cid, "") for cid in tasks])
        total = sum(files.values())
        if total <= self.own_bytes:
            return self._read_myself(files, calls, results)
        parts = _split(files, self.part_bytes)
        prompts = [
            f"{PART_CUE} {i}/{len(parts)}: review these {len(part)} files; read every one "
            "of them and report each finding as `- path:line: problem`, then "
            "`## Files read` and `## Not read`.\n" + "\n".join(f"- {p}" for p in part)
            for i, part in enumerate(parts, 1)
        ]
        return Reply(
            f"{len(files)} files, {total} bytes: more than I can hold. Delegating "
            f"{len(parts)} parts.",
            [("task", {"agent": self.subagent, "prompt": prompt}) for prompt in prompts],
        )

    def _read_myself(
        self,
        files: dict[str, int],
        calls: dict[str, tuple[str, dict[str, Any]]],
        results: dict[str, str],
    ) -> Reply:
        read = _read_paths(calls, results)
        unread = [p for p in files if p not in read]
        if unread:
            batch = unread[: self.reads_per_step]
            return Reply("Reading.", [("read_file", {"path": p}) for p in batch])
        findings = [f for text in results.values() for f in _bugs(text)]
        return Reply(_report(list(files), read, findings, {}))

    def _merge(self, files: dict[str, int], answers: list[str]) -> Reply:
        read: list[str] = []
        findings: list[str] = []
        for answer in answers:
            section = _section(answer, "Files read")
            read += [m.group(1) for line in section if (m := _PATH.match(line))]
            findings += [
                f"{m.group(1)}: {m.group(2)}"
                for line in answer.splitlines()
                if (m := _FINDING.match(line))
            ]
        reasons = {p: "no sub-agent reported reading it" for p in files if p not in read}
        return Reply(_report(list(files), list(dict.fromkeys(read)), findings, reasons))

    # -- a sub-agent ------------------------------------------------------------------

    def _part(self, prompt: str, messages: list[dict[str, Any]]) -> Reply:
        named = [m.group(1) for line in prompt.splitlines() if (m := _PATH.match(line))]
        calls = _calls(messages)
        results = _results(messages)
        read = _read_paths(calls, results)
        noted = [
            f
            for m in messages
            if m.get("role") == "assistant"
            for line in _text(m.get("content")).splitlines()
            if (f := line[2:] if _FINDING.match(line) else "")
        ]
        fresh = [f for text in results.values() for f in _bugs(text) if f not in noted]
        unread = [p for p in named if p not in read]
        if unread:
            notes = "\n".join(f"- {f}" for f in fresh) or "Nothing yet."
            batch = unread[: self.reads_per_step]
            return Reply(f"Notes:\n{notes}", [("read_file", {"path": p}) for p in batch])
        findings = list(dict.fromkeys([*noted, *fresh]))
        lines = ["## Findings", *(f"- {f}" for f in findings or ["none"]), "", "## Files read"]
        lines += [f"- {p}" for p in read]
        missing = [p for p in named if p not in read]
        lines += ["", "## Not read", *(f"- {p}" for p in missing or ["none"])]
        return Reply("\n".join(lines))


def _report(files: list[str], read: list[str], findings: list[str], reasons: dict[str, str]) -> str:
    lines = ["## Summary", f"Reviewed {len(read)} of {len(files)} files.", "", "## Files reviewed"]
    lines += [f"- {p}" for p in read]
    lines += ["", "## Not covered"]
    lines += [f"- {p}: {reasons.get(p, 'not read')}" for p in files if p not in read] or ["none"]
    lines += ["", "## Findings", *(f"- {f}" for f in dict.fromkeys(findings))]
    return "\n".join(lines)


def _split(files: dict[str, int], part_bytes: int) -> list[list[str]]:
    """Neighbouring paths together, each part up to `part_bytes` (one file at least)."""
    parts: list[list[str]] = []
    size = 0
    for path in sorted(files):
        if parts and size + files[path] <= part_bytes:
            parts[-1].append(path)
            size += files[path]
        else:
            parts.append([path])
            size = files[path]
    return parts


def _calls(messages: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every tool call of the conversation: id -> (name, arguments)."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for message in messages:
        for call in message.get("tool_calls") or [] if message.get("role") == "assistant" else []:
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            found[str(call.get("id"))] = (str(function.get("name")), arguments)
    return found


def _results(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {
        str(m.get("tool_call_id")): _text(m.get("content"))
        for m in messages
        if m.get("role") == "tool"
    }


def _read_paths(calls: dict[str, tuple[str, dict[str, Any]]], results: dict[str, str]) -> list[str]:
    """Files whose reading came back without an error (the call names them, not the output)."""
    read: list[str] = []
    for cid, (name, args) in calls.items():
        result = results.get(cid)
        if name == "read_file" and result is not None and not result.startswith("Error"):
            path = str(args.get("path"))
            if path not in read:
                read.append(path)
    return read


def _listed(listing: str) -> dict[str, int]:
    return {
        m.group(1): int(m.group(2))
        for line in listing.splitlines()
        if (m := _LISTING_LINE.match(line.strip()))
    }


def _bugs(output: str) -> list[str]:
    """`path:line: text` of every `# BUG:` line in a read_file output."""
    header = _READ_HEADER.match(output)
    if header is None:
        return []
    found: list[str] = []
    for line in output.splitlines()[1:]:
        numbered = _NUMBERED_LINE.match(line)
        bug = _BUG.search(numbered.group(2)) if numbered else None
        if numbered and bug:
            found.append(f"{header.group(1)}:{numbered.group(1)}: {bug.group(1)}")
    return found


def _section(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == f"## {title}"), None)
    if start is None:
        return []
    out: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        out.append(line.strip())
    return out


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""
