"""An eval's results for CI and for people: JUnit XML and a Markdown report."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from keel.api.evals.results import Change, EvalReport, ScenarioResult

__all__ = ["junit_xml", "markdown_report"]


def junit_xml(report: EvalReport) -> str:
    """One `<testcase>` per attempt, in one `<testsuite>`, as CI systems read them."""
    cases = [(s, a) for s in report.scenarios for a in s.attempts]
    failed = sum(not a.passed for _, a in cases)
    duration = (report.finished_at - report.started_at).total_seconds()
    suite = ET.Element(
        "testsuite",
        name="keel-eval",
        tests=str(len(cases)),
        failures=str(failed),
        errors="0",
        time=f"{duration:.3f}",
        timestamp=report.started_at.isoformat(),
    )
    for scenario, attempt in cases:
        name = scenario.name if report.repeat == 1 else f"{scenario.name} #{attempt.attempt}"
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"keel.eval.{scenario.agent}",
            name=name,
            file=scenario.file,
            time=f"{attempt.duration_s:.3f}",
        )
        if not attempt.passed:
            failure = ET.SubElement(
                case, "failure", message=attempt.failures[0] if attempt.failures else "failed"
            )
            failure.text = "\n".join(attempt.failures)
        out = ET.SubElement(case, "system-out")
        out.text = (
            f"run {attempt.run_id} · {attempt.status} · stop reason {attempt.stop_reason} · "
            f"{attempt.steps} steps · {attempt.tokens} tokens · ${attempt.cost_usd:.4f}"
        )
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _cell(text: str) -> str:
    """Text that cannot break out of a Markdown table cell or inject markup."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def _row(report: EvalReport, s: ScenarioResult) -> str:
    verdict = "pass" if report.passed(s) else "**FAIL**"
    rate = f"{s.passes}/{len(s.attempts)}"
    failed = "; ".join(s.failures)[:400]
    return (
        f"| {_cell(s.name)} | {verdict} | {rate} | {s.mean('steps'):.1f} | "
        f"{s.mean('tokens'):.0f} | ${s.mean('cost_usd'):.4f} | {s.mean('duration_s'):.1f} s | "
        f"{_cell(failed)} |"
    )


def markdown_report(report: EvalReport, changes: list[Change] | None = None) -> str:
    """The table `keel eval` prints, the failures in full, and the baseline comparison."""
    passed = sum(report.passed(s) for s in report.scenarios)
    lines = [
        "# Keel eval",
        "",
        f"{passed} of {len(report.scenarios)} scenarios passed "
        f"({report.repeat} run(s) each, pass rate needed {report.min_pass_rate:.0%}); "
        f"{report.started_at:%Y-%m-%d %H:%M:%S} UTC.",
        "",
        "| scenario | result | passed | steps | tokens | cost | duration | failed expectations |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *(_row(report, s) for s in report.scenarios),
    ]
    failing = [s for s in report.scenarios if s.failures]
    if failing:
        lines += ["", "## Failures"]
        for s in failing:
            lines += ["", f"### {_cell(s.name)}", ""]
            for a in s.attempts:
                lines += [_cell(f"- run {a.run_id} (#{a.attempt}): {f}") for f in a.failures]
    if changes is not None:
        lines += [
            "",
            "## Against the baseline",
            "",
            "| scenario | verdict | what moved |",
            "| --- | --- | --- |",
            *(
                f"| {_cell(c.name)} | {c.verdict} | {_cell('; '.join(c.notes) or '-')} |"
                for c in changes
            ),
        ]
    return "\n".join(lines) + "\n"
