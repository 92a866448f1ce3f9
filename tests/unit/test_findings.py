"""Structured findings: taken from a report's `findings` block, checked, and merged."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from keel.workflows.run.findings import (
    FINDING_FIELDS,
    Finding,
    extract,
    findings_schema,
    merge_findings,
)

REPORT = """## Summary
Two problems.

## Findings
- high pkg/db.py:12 — SQL from input

```findings
[
  {"file": "pkg/db.py", "line": 12, "severity": "high", "title": "SQL from input",
   "detail": "Use parameters."},
  {"file": "README.md", "line": null, "severity": "low", "title": "Thin README"}
]
```
"""


def finding(file: str, line: int | None, severity: str, title: str = "t") -> Finding:
    return Finding.model_validate(
        {"file": file, "line": line, "severity": severity, "title": title}
    )


def test_a_report_without_a_block_has_no_findings() -> None:
    assert extract("## Findings\n- none\n\n```python\nprint(1)\n```\n") is None


def test_the_block_is_validated_and_matches_the_published_schema() -> None:
    record = extract(REPORT)
    assert record is not None and record.error is None
    assert [(f.file, f.line, f.severity) for f in record.findings] == [
        ("pkg/db.py", 12, "high"),
        ("README.md", None, "low"),
    ]
    assert record.findings[1].detail == ""
    # What the docs publish is what a block holds; Keel adds `verified` and `reported_by`.
    data = [f.model_dump(mode="json", include=FINDING_FIELDS) for f in record.findings]
    jsonschema.validate(data, findings_schema())


def test_the_last_block_wins_and_an_object_wrapper_is_accepted() -> None:
    first = "```findings\n[]\n```\n"
    one = {"file": "a.py", "line": 1, "severity": "medium", "title": "x"}
    last = f"```findings\n{json.dumps({'findings': [one]})}\n```"
    record = extract(first + "text\n" + last)
    assert record is not None and [f.file for f in record.findings] == ["a.py"]
    indented = extract("1. findings:\n   ```findings\n   []\n   ```\n")
    assert indented is not None and indented.findings == [] and indented.error is None


def test_a_bad_block_is_recorded_as_an_error_not_as_findings() -> None:
    broken = extract('```findings\n[{"file": \n```')
    assert broken is not None and broken.findings == []
    assert broken.error and broken.error.startswith("The findings block is not valid JSON")
    wrong = extract(
        '```findings\n[{"file": "a.py", "line": 0, "severity": "urgent", "title": "x"}]\n```'
    )
    assert wrong is not None and wrong.findings == []
    assert wrong.error and "does not match the schema: 0.line" in wrong.error
    extra = extract('```findings\n[{"file": "a.py", "severity": "low", "title": "x", "x": 1}]\n```')
    assert extra is not None and extra.error and "0.x" in extra.error
    with_block = json.dumps([{"file": "a.py", "severity": "low", "title": "x"}] * 501)
    too_many = extract(f"```findings\n{with_block}\n```")
    assert too_many is not None and too_many.error and "more than 500" in too_many.error


def test_merge_keeps_one_finding_per_place_the_most_severe_and_names_every_reporter() -> None:
    merged = merge_findings(
        [
            ("alpha", [finding("pkg/a.py", 3, "low", "maybe"), finding("b.py", None, "low")]),
            (
                "beta",
                [finding("./pkg/a.py", 3, "high", "surely"), finding("pkg/a.py", 4, "medium")],
            ),
            ("gamma", [finding("pkg/a.py", 3, "medium", "perhaps")]),
        ]
    )
    assert [(f.file, f.line, f.severity, f.title, f.reported_by) for f in merged] == [
        ("./pkg/a.py", 3, "high", "surely", ["alpha", "beta", "gamma"]),
        ("pkg/a.py", 4, "medium", "t", ["beta"]),
        ("b.py", None, "low", "t", ["alpha"]),
    ]
    assert merge_findings([]) == []


def test_the_docs_show_the_schema_keel_validates_with() -> None:
    page = (Path(__file__).parents[2] / "docs" / "findings.md").read_text()
    shown = page.split("<!-- findings-schema -->\n```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(shown) == findings_schema()
