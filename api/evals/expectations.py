"""Checking a scenario's expectations against what its run did.

Each failed expectation is one sentence that starts with the field that failed
(`expect.report.contains[0]: ...`), so a reader can find it in the scenario file.
"""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from pathlib import Path

from pydantic import BaseModel, Field

from keel.api.evals.scenario import Expectations, ToolExpectation

__all__ = ["Finding", "Observation", "ToolCallSeen", "check", "report_findings"]


class ToolCallSeen(BaseModel):
    """One tool call of the run or of one of its sub-agents, from its events."""

    run_id: str
    name: str
    arguments: dict[str, object] = Field(default_factory=dict)
    ok: bool | None = None
    """True: it ran without an error; False: error, denial or rejection; None: no result."""


class Finding(BaseModel):
    """A finding the report names: a file and, when the text says one, a severity."""

    file: str
    severity: str | None


class Observation(BaseModel):
    """What a finished run did, as the API shows it."""

    run_id: str
    status: str
    stop_reason: str | None
    error: str | None
    steps: int
    tool_calls: int
    tokens: int
    cost_usd: float
    duration_s: float
    report: str
    calls: list[ToolCallSeen]
    findings: list[Finding] | None = None
    """Structured findings, when the API returns them with the run; else the report's."""

    @property
    def files_read(self) -> list[str]:
        """Paths `read_file` read without an error, by the run or a sub-agent."""
        paths = (
            str(c.arguments.get("path", "")) for c in self.calls if c.name == "read_file" and c.ok
        )
        return list(dict.fromkeys(p for p in paths if p))


_SEVERITY = re.compile(r"\b(critical|high|medium|low|info)\b", re.IGNORECASE)
# A path with a directory or an extension, optionally `:line`, as reports cite them.
_PATH = re.compile(r"((?:[\w.-]+/)*[\w-]+\.[a-z0-9]{1,6}\b|(?:[\w.-]+/)+[\w.-]+)(?::\d+)?")
_ENTRY = re.compile(r"^\s*(?:[-*]|\d+[.)]|#{3,6})\s+")


def report_findings(report: str) -> list[Finding]:
    """Findings of a report that came without structured ones (no valid `findings`
    block, docs/findings.md): each bullet or `###` heading under `## Findings` (with
    the lines up to the next one) is a finding; its file is the first path it cites,
    its severity the first severity word."""
    entries: list[str] = []
    inside = False
    for line in report.splitlines():
        if line.startswith("## "):
            inside = line[3:].strip().lower().startswith("findings")
            continue
        if not inside:
            continue
        if _ENTRY.match(line):
            entries.append(line)
        elif entries and line.strip():
            entries[-1] += "\n" + line
    findings = []
    for entry in entries:
        path = _PATH.search(entry)
        if path is None:
            continue
        severity = _SEVERITY.search(entry)
        findings.append(Finding(file=path[1], severity=severity[1].lower() if severity else None))
    return findings


def _arguments_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _matches(call: ToolCallSeen, want: ToolExpectation) -> bool:
    if call.name != want.name or (want.succeeded and not call.ok):
        return False
    return all(
        key in call.arguments and fnmatchcase(_arguments_text(call.arguments[key]), pattern)
        for key, pattern in want.arguments.items()
    )


def _describe(want: ToolExpectation) -> str:
    args = f" with {json.dumps(want.arguments)}" if want.arguments else ""
    return f"{want.name}{args}{' (succeeding)' if want.succeeded else ''}"


def _seen(calls: list[ToolCallSeen]) -> str:
    names = list(dict.fromkeys(c.name for c in calls))
    return ", ".join(names) if names else "no tools"


def _check_run(expect: Expectations, seen: Observation) -> list[str]:
    failures = []
    if expect.status is not None and seen.status != expect.status:
        why = f" ({seen.error})" if seen.error else ""
        failures.append(f"expect.status: wanted {expect.status}, the run ended {seen.status}{why}")
    if expect.stop_reason is not None and seen.stop_reason != expect.stop_reason:
        failures.append(
            f"expect.stop_reason: wanted {expect.stop_reason}, "
            f"the run stopped on {seen.stop_reason}"
        )
    return failures


def _check_tools(expect: Expectations, seen: Observation) -> list[str]:
    failures = []
    for i, want in enumerate(expect.tools_called):
        if not any(_matches(c, want) for c in seen.calls):
            failures.append(
                f"expect.tools_called[{i}]: no call of {_describe(want)}; "
                f"the run called {_seen(seen.calls)}"
            )
    for i, want in enumerate(expect.tools_not_called):
        hits = [c for c in seen.calls if _matches(c, want)]
        if hits:
            failures.append(
                f"expect.tools_not_called[{i}]: {_describe(want)} was called "
                f"{len(hits)} time(s), first with {json.dumps(hits[0].arguments)}"
            )
    read = seen.files_read
    for i, pattern in enumerate(expect.files_read):
        if not any(fnmatchcase(path, pattern) for path in read):
            failures.append(
                f"expect.files_read[{i}]: nothing matching {pattern!r} was read; "
                f"read: {', '.join(read) or 'nothing'}"
            )
    return failures


def _check_report(expect: Expectations, seen: Observation) -> list[str]:
    failures = []
    report = seen.report
    want = expect.report
    for i, text in enumerate(want.contains):
        if text not in report:
            failures.append(f"expect.report.contains[{i}]: the report does not contain {text!r}")
    for i, pattern in enumerate(want.matches):
        if re.search(pattern, report, re.MULTILINE) is None:
            failures.append(f"expect.report.matches[{i}]: no match for /{pattern}/ in the report")
    for i, text in enumerate(want.not_contains):
        if text in report:
            failures.append(f"expect.report.not_contains[{i}]: the report contains {text!r}")
    found = seen.findings if seen.findings is not None else report_findings(report)
    for i, finding in enumerate(expect.findings):
        hit = any(
            fnmatchcase(f.file, finding.file)
            and (finding.severity is None or f.severity == finding.severity)
            for f in found
        )
        if not hit:
            listed = ", ".join(f"{f.file} ({f.severity or '?'})" for f in found) or "none"
            wanted = f"{finding.file}" + (f" ({finding.severity})" if finding.severity else "")
            failures.append(f"expect.findings[{i}]: no finding {wanted}; the report has: {listed}")
    return failures


def _check_workspace(expect: Expectations, workspace: Path) -> list[str]:
    failures = []
    for i, want in enumerate(expect.workspace):
        path = workspace / want.path
        if path.is_file() != want.exists:
            state = "does not exist" if want.exists else "exists"
            failures.append(f"expect.workspace[{i}]: {want.path} {state} after the run")
        elif want.exists and want.contains is not None:
            text = path.read_text(encoding="utf-8", errors="replace")
            if want.contains not in text:
                failures.append(
                    f"expect.workspace[{i}]: {want.path} does not contain {want.contains!r}"
                )
    return failures


def _check_limits(expect: Expectations, seen: Observation) -> list[str]:
    limits = expect.limits
    figures: list[tuple[str, float | None, float, str]] = [
        ("max_steps", limits.max_steps, seen.steps, "steps"),
        ("max_tool_calls", limits.max_tool_calls, seen.tool_calls, "tool calls"),
        ("max_tokens", limits.max_tokens, seen.tokens, "tokens"),
        ("max_cost_usd", limits.max_cost_usd, seen.cost_usd, "USD"),
        ("max_duration_s", limits.max_duration_s, seen.duration_s, "seconds"),
    ]
    return [
        f"expect.limits.{name}: the run used {used:g} {unit}, more than {bound:g}"
        for name, bound, used, unit in figures
        if bound is not None and used > bound
    ]


# A sentence quotes what the run did (paths read, findings); past this it is cut.
MAX_SENTENCE_CHARS = 2000


def _short(sentence: str) -> str:
    if len(sentence) <= MAX_SENTENCE_CHARS:
        return sentence
    return sentence[: MAX_SENTENCE_CHARS - 1] + "…"


def check(expect: Expectations, seen: Observation, workspace: Path) -> list[str]:
    """Every expectation that does not hold, as a sentence naming its field."""
    failures = [
        *_check_run(expect, seen),
        *_check_tools(expect, seen),
        *_check_report(expect, seen),
        *_check_workspace(expect, workspace),
        *_check_limits(expect, seen),
    ]
    return [_short(f) for f in failures]
