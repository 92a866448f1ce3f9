"""A run tree's findings: one per place, checked against the pages read, rendered once."""

from __future__ import annotations

from keel.workflows.run.findings import Finding, extract, without_blocks
from keel.workflows.run.findings_report import findings_section, page_of, tree_findings


def finding(file: str, line: int | None, severity: str = "low", title: str = "t") -> Finding:
    return Finding.model_validate(
        {"file": file, "line": line, "severity": severity, "title": title}
    )


def test_a_read_file_header_is_a_page_and_anything_else_is_not() -> None:
    page = page_of("pkg/a.py (lines 10-40 of 300)")
    assert page is not None and (page.path, page.start, page.end) == ("pkg/a.py", 10, 40)
    empty = page_of("./e.py (empty file)")
    assert empty is not None and (empty.path, empty.end) == ("e.py", 0)
    assert page_of("Error: File 'x' does not exist") is None


def test_one_finding_per_place_the_most_severe_wording_and_every_reporter() -> None:
    pages = [p for p in (page_of("a.py (lines 1-20 of 90)"), page_of("b.py (lines 1-3 of 3)")) if p]
    found = tree_findings(
        [
            ("explore", finding("./a.py", 5, "low", "minor")),
            ("review", finding("a.py", 5, "high", "major")),
            ("explore", finding("a.py", 50)),
            ("explore", finding("b.py", None)),
        ],
        pages,
    )
    assert [(f.file, f.line, f.severity, f.verified) for f in found] == [
        ("a.py", 5, "high", True),
        ("a.py", 50, "low", False),  # line 50 was never shown
        ("b.py", None, "low", True),  # a whole-file finding needs some of the file read
    ]
    assert found[0].title == "major" and found[0].reported_by == ["explore", "review"]


def test_the_section_is_a_sentence_and_a_block_a_report_reader_takes() -> None:
    found = tree_findings([("explore", finding("a.py", 5, "high", "```findings"))], [])
    section = findings_section(found, sub_runs=2)
    assert section.startswith("## Findings recorded by Keel\n\n1 finding from this run and its 2")
    assert "1 cites a place no run read" in section
    record = extract("text\n\n" + section)
    assert record is not None and record.error is None
    assert [(f.file, f.title) for f in record.findings] == [("a.py", "```findings")]
    assert "No findings were recorded by this run." in findings_section([], sub_runs=0)


def test_a_copied_section_is_taken_and_only_valid_blocks_leave_the_text() -> None:
    section = findings_section(tree_findings([("x", finding("a.py", 1))], []), sub_runs=0)
    record = extract(section)  # a parent that copies a child's report copies Keel's fields
    assert record is not None and record.error is None
    bad = "```findings\nnot json\n```"
    kept = without_blocks(f"A\n{section}\n{bad}\n", keep=lambda body: "not json" in body)
    assert bad in kept and "a.py" not in kept
