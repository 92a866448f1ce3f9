"""Eval scenario files, expectations, findings, baselines and reports, without a run."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

import pytest

from keel.api.evals.expectations import Finding, Observation, ToolCallSeen, check, report_findings
from keel.api.evals.reports import junit_xml, markdown_report
from keel.api.evals.results import AttemptResult, EvalReport, ScenarioResult, compare
from keel.api.evals.runner import model_names
from keel.api.evals.scenario import (
    Expectations,
    ScenarioError,
    bundled_scenarios,
    load_scenarios,
)
from keel.api.evals.stack import split_by_model

MINIMAL = "agent: review\ninput: Review it.\nmodel: {script: {turns: [{content: done}]}}\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_built_in_scenarios_load() -> None:
    scenarios = load_scenarios([bundled_scenarios()])
    assert {s.agent for s in scenarios} == {"review", "investigate", "explore", "build"}
    assert all(s.scripted for s in scenarios)
    for scenario in scenarios:
        scenario.script()  # every script file they name exists and validates


def test_errors_name_the_file_and_the_field(tmp_path: Path) -> None:
    bad = write(
        tmp_path,
        "bad.yaml",
        "agent: review\ninput: x\nmodel: {script: {turns: []}}\n"
        "expect: {stop_reasn: final_answer, limits: {max_steps: -1}}\n",
    )
    with pytest.raises(ScenarioError) as caught:
        load_scenarios([bad])
    message = str(caught.value)
    assert f"{bad}: expect.stop_reasn: Extra inputs are not permitted" in message
    assert f"{bad}: expect.limits.max_steps:" in message
    assert f"{bad}: model.script: Value error, A script needs `turns` or a `policy`." in message
    assert len(message.splitlines()) == 3


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("agent: review\ninput: x\nmodel: {}\n", "model: Value error, give either `script`"),
        ("input: x\nmodel: {configured: true}\n", "agent: Field required"),
        (MINIMAL + "decisions: [{decision: answer}]\n", "decisions.0: Value error, an `answer`"),
        (
            MINIMAL + "expect: {report: {matches: ['(']}}\n",
            "expect.report: Value error, matches[0]",
        ),
        (MINIMAL + "workspace: {files: {'../x': y}}\n", "workspace: Value error, workspace file"),
        (MINIMAL + "workspace: {dir: nowhere}\n", "workspace.dir: "),
        ("agent: a\ninput: x\nmodel: {script: missing.yaml}\n", "model.script: "),
        ("- a list\n", "a scenario is a mapping"),
        ("agent: [unclosed\n", "not valid YAML"),
    ],
)
def test_each_kind_of_mistake_is_named(tmp_path: Path, text: str, field: str) -> None:
    path = write(tmp_path, "s.yaml", text)
    with pytest.raises(ScenarioError) as caught:
        load_scenarios([path])
    assert f"{path}: {field}" in str(caught.value)


def test_names_default_to_the_file_and_must_be_unique(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    write(tmp_path / "a", "same.yaml", MINIMAL)
    write(tmp_path, "same.yaml", MINIMAL)
    with pytest.raises(ScenarioError, match="'same' is used by more than one scenario"):
        load_scenarios([tmp_path])
    assert [s.name for s in load_scenarios([tmp_path / "a"])] == ["same"]


def observation(**changes: object) -> Observation:
    values: dict[str, object] = {
        "run_id": "run-1",
        "status": "completed",
        "stop_reason": "final_answer",
        "error": None,
        "steps": 3,
        "tool_calls": 2,
        "tokens": 900,
        "cost_usd": 0.002,
        "duration_s": 4.0,
        "report": "## Findings\n- high src/app.py:3 — SQL built by hand\n",
        "calls": [
            ToolCallSeen(
                run_id="run-1", name="read_file", arguments={"path": "src/app.py"}, ok=True
            ),
            ToolCallSeen(run_id="run-1", name="read_file", arguments={"path": "nope.py"}, ok=False),
        ],
    }
    values.update(changes)
    return Observation.model_validate(values)


def test_every_unmet_expectation_is_one_sentence_naming_its_field(tmp_path: Path) -> None:
    expect = Expectations.model_validate(
        {
            "stop_reason": "max_steps",
            "tools_called": [
                {"name": "read_file", "arguments": {"path": "nope.py"}, "succeeded": True}
            ],
            "tools_not_called": [{"name": "read_file", "arguments": {"path": "src/*"}}],
            "files_read": ["docs/*"],
            "report": {
                "contains": ["## Tests"],
                "matches": ["^## Summary"],
                "not_contains": ["SQL"],
            },
            "findings": [{"file": "src/app.py", "severity": "low"}],
            "workspace": [{"path": "CHANGELOG.md"}],
            "limits": {"max_tokens": 500, "max_cost_usd": 0.001},
        }
    )
    failures = check(expect, observation(), tmp_path)
    fields = [f.split(":", 1)[0] for f in failures]
    assert fields == [
        "expect.stop_reason",
        "expect.tools_called[0]",
        "expect.tools_not_called[0]",
        "expect.files_read[0]",
        "expect.report.contains[0]",
        "expect.report.matches[0]",
        "expect.report.not_contains[0]",
        "expect.findings[0]",
        "expect.workspace[0]",
        "expect.limits.max_tokens",
        "expect.limits.max_cost_usd",
    ]
    assert "read: src/app.py" in failures[3]  # the failed read does not count
    assert "src/app.py (high)" in failures[7]


def test_met_expectations_pass(tmp_path: Path) -> None:
    (tmp_path / "CHANGELOG.md").write_text("## 1.0\n")
    expect = Expectations.model_validate(
        {
            "stop_reason": "final_answer",
            "tools_called": [
                {"name": "read_file", "arguments": {"path": "src/*"}, "succeeded": True}
            ],
            "tools_not_called": [{"name": "bash"}],
            "files_read": ["src/app.py"],
            "findings": [{"file": "src/*.py", "severity": "high"}],
            "workspace": [
                {"path": "CHANGELOG.md", "contains": "1.0"},
                {"path": "x", "exists": False},
            ],
            "limits": {"max_steps": 3, "max_tokens": 900},
        }
    )
    assert check(expect, observation(), tmp_path) == []


def test_findings_are_parsed_from_the_reports_findings_section() -> None:
    report = (
        "## Summary\nsee src/other.py (high)\n\n## Findings\n"
        "### 1. Money is rounded with floats (high)\n"
        "In `inventory/pricing.py:12`, use `decimal.Decimal`.\n"
        "- medium app/store.py:9 — quantities not validated\n"
        "- inventory/store.py:13: FIXME drives stock below zero\n"
        "- a finding without a file\n\n## Tests\n- tests/test_x.py (low)\n"
    )
    found = [(f.file, f.severity) for f in report_findings(report)]
    assert found == [
        ("inventory/pricing.py", "high"),
        ("app/store.py", "medium"),
        ("inventory/store.py", None),
    ]


def result(name: str, passed: list[bool], tokens: int = 1000, cost: float = 0.01) -> ScenarioResult:
    attempts = [
        AttemptResult(
            attempt=i + 1,
            run_id=f"run-{name}-{i}",
            passed=ok,
            failures=[] if ok else ["expect.report.contains[0]: the report does not contain 'x'"],
            tokens=tokens,
            cost_usd=cost,
            duration_s=1.5,
        )
        for i, ok in enumerate(passed)
    ]
    return ScenarioResult(name=name, file=f"{name}.yaml", agent="review", attempts=attempts)


def report_of(*scenarios: ScenarioResult, repeat: int = 1) -> EvalReport:
    now = datetime.now(UTC)
    return EvalReport(started_at=now, finished_at=now, repeat=repeat, scenarios=list(scenarios))


def test_a_baseline_comparison_says_what_got_better_and_worse(tmp_path: Path) -> None:
    before = report_of(
        result("steady", [True]),
        result("regressed", [True, True]),
        result("cheaper", [True], tokens=2000, cost=0.02),
        result("dropped", [True]),
    )
    before.save(tmp_path / "before.json")
    now = report_of(
        result("steady", [True], tokens=1020),
        result("regressed", [True, False]),
        result("cheaper", [True], tokens=1000, cost=0.01),
        result("added", [False]),
    )
    changes = {c.name: c for c in compare(now, EvalReport.load(tmp_path / "before.json"))}
    assert {n: c.verdict for n, c in changes.items()} == {
        "steady": "same",
        "regressed": "worse",
        "cheaper": "better",
        "added": "new",
        "dropped": "gone",
    }
    assert changes["regressed"].notes == ["pass rate 100% → 50%"]
    assert changes["cheaper"].notes == [
        "tokens 2000 → 1000 (-50%)",
        "cost $0.0200 → $0.0100 (-50%)",
    ]


def test_a_file_that_is_not_a_result_file_is_refused_clearly(tmp_path: Path) -> None:
    path = write(tmp_path, "junk.json", '{"scenarios": 3}')
    with pytest.raises(ValueError, match="not a `keel eval` result file"):
        EvalReport.load(path)


def test_junit_xml_has_a_case_per_attempt_and_the_failures() -> None:
    report = report_of(result("a", [True, False, True]), result("b<&>", [True]), repeat=3)
    suite = ET.fromstring(junit_xml(report))
    assert suite.tag == "testsuite" and suite.get("tests") == "4" and suite.get("failures") == "1"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["a #1", "a #2", "a #3", "b<&> #1"]
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("message", "").startswith(
        "expect.report.contains[0]"
    )


def test_the_markdown_report_shows_pass_rates_and_keeps_cells_inert() -> None:
    report = report_of(result("a|<script>", [True, False, True]), repeat=3)
    text = markdown_report(report, compare(report, report))
    assert "| a\\|&lt;script> | **FAIL** | 2/3 |" in text
    assert "## Failures" in text and "## Against the baseline" in text
    assert "<script>" not in text


def test_structured_findings_from_the_api_win_over_the_report(tmp_path: Path) -> None:
    expect = Expectations.model_validate({"findings": [{"file": "src/db.py", "severity": "high"}]})
    structured = [Finding(file="src/db.py", severity="high")]
    assert check(expect, observation(findings=structured), tmp_path) == []
    failures = check(expect, observation(findings=[]), tmp_path)
    assert failures == ["expect.findings[0]: no finding src/db.py (high); the report has: none"]


def test_scripted_and_configured_scenarios_are_not_mixed(tmp_path: Path) -> None:
    write(tmp_path, "scripted.yaml", MINIMAL)
    write(tmp_path, "real.yaml", "agent: review\ninput: x\nmodel: {configured: true}\n")
    scenarios = load_scenarios([tmp_path])
    with pytest.raises(ScenarioError, match="run them in two `keel eval` calls"):
        split_by_model(scenarios)
    assert split_by_model(scenarios[1:]) is True and split_by_model(scenarios[:1]) is False
    assert model_names(scenarios) == {"real": None, "scripted": "eval-2-scripted"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"finished_at": 0}, "finished_at"),
        ({"finished_at": "1999-01-01T00:00:00Z"}, "finished_at is before started_at"),
        ({"repeat": 0}, "repeat"),
        ({"attempt": {"duration_s": False}}, "duration_s"),
        ({"attempt": {"tokens": "3"}}, "tokens"),
        ({"attempt": {"attempt": 0}}, "attempt"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_a_results_file_is_read_strictly(
    tmp_path: Path, change: dict[str, object], field: str
) -> None:
    data = report_of(result("a", [True])).model_dump(mode="json")
    attempt = change.pop("attempt", None)
    if isinstance(attempt, dict):
        data["scenarios"][0]["attempts"][0].update(attempt)
    data.update(change)
    path = write(tmp_path, "r.json", json.dumps(data))
    with pytest.raises(ValueError, match=field):
        EvalReport.load(path)
