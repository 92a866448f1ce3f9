"""A report in the console: file names shown literally, the findings block as a table."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from playwright.async_api import Page, expect

from keel.worker.scripted.llm import Script, Turn
from tests.browser.test_console_runs import sign_in_with_link
from tests.conftest import auth_headers

REPORT = (
    "# Review\n\n"
    "The package starts in src/requests/__init__.py; see also __init__.py, "
    "CODE_OF_CONDUCT.md and `snake_case_name`. The __all__ list is complete.\n\n"
    "**Really** _emphasised_ stays emphasis.\n\n"
    "```findings\n"
    '[{"file": "src/requests/__init__.py", "line": 3, "severity": "high",'
    ' "title": "<img src=x onerror=\\"window.__pwned=1\\">", "detail": "Fix __x__ now."}]\n'
    "```\n"
)


async def test_a_report_shows_file_names_literally_and_findings_as_a_table(
    console_stack: Any, page: Page
) -> None:
    async with console_stack(Script(turns=[Turn(content=REPORT)])) as c:
        (c.workspace / "src" / "requests").mkdir(parents=True, exist_ok=True)
        (c.workspace / "src" / "requests" / "__init__.py").write_text("a\nb\nc\n")
        async with httpx.AsyncClient(base_url=c.url, headers=auth_headers()) as http:
            body = {"agent": "investigate", "input": "Look", "workspace": str(c.workspace)}
            run_id = (await http.post("/v1/runs", json=body)).json()["id"]
            for _ in range(300):
                if (await http.get(f"/v1/runs/{run_id}")).json()["status"] == "completed":
                    break
                await asyncio.sleep(0.1)
        await sign_in_with_link(page, c.link)
        await page.goto(f"{c.url}/console/runs/{run_id}")
        report = page.locator("#report-body")
        await expect(report).to_contain_text("src/requests/__init__.py")
        text = await report.inner_text()
        for name in ("src/requests/__init__.py", "__init__.py,", "CODE_OF_CONDUCT.md", "__all__"):
            assert name in text, text
        codes = await report.locator("p code").all_inner_texts()
        assert {"src/requests/__init__.py", "__init__.py", "CODE_OF_CONDUCT.md"} <= set(codes)
        emphasis = await report.locator("em, strong").all_inner_texts()
        assert "Really" in emphasis and "emphasised" in emphasis
        assert not [e for e in emphasis if e in ("init", "OF", "all")], emphasis
        # The machine-readable block is a table for people, not JSON; its text stays inert.
        table = report.locator("table.findings")
        await expect(table.locator("tbody tr")).to_have_count(1)
        await expect(table.locator("td").nth(1)).to_have_text("src/requests/__init__.py:3")
        await expect(table).to_contain_text('<img src=x onerror="window.__pwned=1">')
        assert '"severity"' not in text
        assert await report.locator("img, script").count() == 0
        assert await page.evaluate("window.__pwned ?? null") is None
        assert page.script_errors == []  # type: ignore[attr-defined]
