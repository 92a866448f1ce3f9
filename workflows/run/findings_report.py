"""A run tree's findings as Keel reports them, whatever the model's last answer says.

Each run's findings are kept in a ledger as they are made (a `findings` block in its
answer, or a `report_finding` call). A report's findings section is rendered from the
ledger of the run and every run below it: one finding per place, the most severe
wording, each checked against Keel's own tool records. A finding whose place no run of
the tree read with `read_file` is kept and marked `verified: false` rather than dropped:
a reviewer may know a line without paging to it, and a lost finding costs more than a
flagged one. Pure code: the store reads the ledger and the records, this decides.
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, Field

from keel.workflows.run.findings import Finding, RecordedFinding, merge_findings, normal_path

__all__ = ["FINDINGS_HEADING", "ReadPage", "findings_section", "page_of", "tree_findings"]

FINDINGS_HEADING = "## Findings recorded by Keel"
# The first line of a read_file answer: `pkg/a.py (lines 1-120 of 300)` or `(empty file)`.
READ_HEADER = re.compile(
    r"^(?P<path>.+?) \((?:lines (?P<start>\d+)-(?P<end>\d+) of \d+|empty file)\)$"
)


class ReadPage(BaseModel):
    """Lines of a file some run of the tree was shown by read_file."""

    path: str
    start: int = Field(description="First line shown; 0 for an empty file.")
    end: int = Field(description="Last line shown; 0 for an empty file.")


def page_of(header: str) -> ReadPage | None:
    """The page a read_file answer's first line describes; None for anything else."""
    match = READ_HEADER.match(header.strip())
    if match is None:
        return None
    start, end = match.group("start"), match.group("end")
    return ReadPage(
        path=normal_path(match.group("path")),
        start=int(start) if start else 0,
        end=int(end) if end else 0,
    )


def tree_findings(
    reported: list[tuple[str, Finding]], pages: list[ReadPage]
) -> list[RecordedFinding]:
    """One finding per place from what each agent reported, each checked against the pages
    read; most severe first, then by place."""
    merged = merge_findings([(agent, [finding]) for agent, finding in reported])
    return [
        RecordedFinding(
            **m.model_dump(exclude={"reported_by", "file"}),
            file=normal_path(m.file),
            reported_by=m.reported_by,
            verified=_was_read(m, pages),
        )
        for m in merged
    ]


def _was_read(finding: Finding, pages: list[ReadPage]) -> bool:
    path = normal_path(finding.file)
    line = finding.line
    return any(
        page.path == path and (line is None or page.start <= line <= page.end) for page in pages
    )


def findings_section(findings: list[RecordedFinding], *, sub_runs: int) -> str:
    """The report's findings section: a sentence, then the findings as a `findings` block
    (docs/findings.md), which the CLI and the console show as a table."""
    where = "this run" + (f" and its {_count(sub_runs, 'sub-agent run')}" if sub_runs else "")
    if findings:
        said = f"{_count(len(findings), 'finding')} from {where}, one per place, most severe first"
    else:
        said = f"No findings were recorded by {where}"
    unread = sum(1 for f in findings if not f.verified)
    if unread:
        said += (
            f"; {unread} {'cites a place' if unread == 1 else 'cite places'} no run read "
            "with read_file (marked `verified: false`)"
        )
    items = [f.model_dump(mode="json") for f in findings]
    block = "```findings\n" + json.dumps(items, indent=1, ensure_ascii=False) + "\n```"
    return f"{FINDINGS_HEADING}\n\n{said}.\n\n{block}\n"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
