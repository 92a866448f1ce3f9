"""Structured findings: what a review found, machine-readable, beside its Markdown report.

Any message a run's model writes (its final answer most often) may hold a fenced block
tagged `findings` with a JSON array of findings (see `Finding`); a run may also record
findings one by one with the `report_finding` tool. Both go to the findings ledger
(`activities/store/findings_store`) as they are made, and a report's findings are
rendered from the ledger of its run tree (`findings_report`). Pure code: the store calls
`extract_all` and the coordinator calls `merge_findings`, so both read findings the same
way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

Severity = Literal["high", "medium", "low"]
SEVERITY_ORDER: dict[str, int] = {"high": 0, "medium": 1, "low": 2}
# The block's info string is `findings`; its body runs to the next fence. As in Markdown,
# a fence may be indented by up to three spaces.
FINDINGS_BLOCK = re.compile(
    r"^ {0,3}```findings[ \t]*\r?\n(.*?)^ {0,3}```[ \t]*$", re.MULTILINE | re.DOTALL
)
MAX_FINDINGS = 500


class Finding(BaseModel):
    """One problem a review found, at a place in the workspace."""

    model_config = ConfigDict(extra="forbid")

    file: str = Field(min_length=1, max_length=1000, description="Path relative to the workspace.")
    line: int | None = Field(
        default=None, ge=1, description="1-based line the finding is at; null for a whole file."
    )
    severity: Severity = Field(description="high, medium or low.")
    title: str = Field(min_length=1, max_length=300, description="The problem, in one line.")
    detail: str = Field(default="", max_length=10_000, description="Why, and the fix.")


class RecordedFinding(Finding):
    """A finding as Keel keeps it for a run tree: once per place, with who reported it and
    whether Keel's own tool records show that some run of the tree read that place."""

    verified: bool = Field(
        default=True,
        description="Some run of the tree read the cited line (or, for a whole-file "
        "finding, some of the file) with read_file; false: no record shows it was read.",
    )
    reported_by: list[str] = Field(
        default_factory=list, description="The agents of the tree that reported it, in order."
    )


class FindingsRecord(BaseModel):
    """What a run's report said in machine-readable form, as the run keeps it."""

    findings: list[RecordedFinding] = Field(default_factory=list)
    error: str | None = Field(
        default=None, description="Why the report's findings block was not taken, if it was not."
    )


class MergedFinding(Finding):
    """A finding as several agents reported it: once per place, the most severe wording."""

    reported_by: list[str] = Field(description="The agents that reported it, in order.")


FINDINGS_LIST: TypeAdapter[list[Finding]] = TypeAdapter(list[Finding])
FINDING_FIELDS = set(Finding.model_fields)


def findings_schema() -> dict[str, object]:
    """The JSON Schema of a findings block (an array of findings), for docs and clients."""
    return FINDINGS_LIST.json_schema()


# What a block may hold: a finding, or one Keel wrote for a report (a model that copies a
# sub-agent's report copies those too); Keel's own fields are recomputed, never taken.
BLOCK_LIST: TypeAdapter[list[RecordedFinding]] = TypeAdapter(list[RecordedFinding])


def extract(report: str) -> FindingsRecord | None:
    """The findings of a report's last `findings` block; None when it has none."""
    blocks = FINDINGS_BLOCK.findall(report)
    if not blocks:
        return None
    return parse_block(blocks[-1])


def extract_all(report: str) -> list[FindingsRecord]:
    """Each `findings` block of a report, in order, parsed on its own."""
    return [parse_block(body) for body in FINDINGS_BLOCK.findall(report)]


def without_blocks(report: str, keep: Callable[[str], bool]) -> str:
    """The report without the `findings` blocks whose body `keep` rejects."""
    return FINDINGS_BLOCK.sub(lambda m: m.group(0) if keep(m.group(1)) else "", report)


def parse_block(body: str) -> FindingsRecord:
    """One block's findings, or why it cannot be taken."""
    try:
        data = json.loads(body)
    except ValueError as exc:
        return FindingsRecord(error=f"The findings block is not valid JSON: {exc}.")
    if isinstance(data, dict) and set(data) == {"findings"}:
        data = data["findings"]
    if isinstance(data, list) and len(data) > MAX_FINDINGS:
        return FindingsRecord(error=f"The findings block has more than {MAX_FINDINGS} findings.")
    try:
        found = BLOCK_LIST.validate_python(data)
        return FindingsRecord(
            findings=[RecordedFinding(**f.model_dump(include=FINDING_FIELDS)) for f in found]
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the block"
        return FindingsRecord(
            error=f"The findings block does not match the schema: {where}: {first['msg']}."
        )


def merge_findings(by_agent: list[tuple[str, list[Finding]]]) -> list[MergedFinding]:
    """One finding per (file, line), however many agents reported it: the most severe
    report's wording wins, every reporter is named; most severe first, then by place."""
    merged: dict[tuple[str, int | None], MergedFinding] = {}
    for agent, findings in by_agent:
        for finding in findings:
            key = (normal_path(finding.file), finding.line)
            seen = merged.get(key)
            if seen is None:
                merged[key] = MergedFinding(**finding.model_dump(), reported_by=[agent])
                continue
            reporters = seen.reported_by + ([agent] if agent not in seen.reported_by else [])
            if SEVERITY_ORDER[finding.severity] < SEVERITY_ORDER[seen.severity]:
                seen = MergedFinding(**finding.model_dump(), reported_by=reporters)
            merged[key] = seen.model_copy(update={"reported_by": reporters})
    return sorted(
        merged.values(),
        key=lambda f: (SEVERITY_ORDER[f.severity], normal_path(f.file), f.line or 0),
    )


def normal_path(path: str) -> str:
    """`./pkg/a.py` and `pkg/a.py` are one place."""
    return path.strip().removeprefix("./")
