"""The console's Evals page: results `keel eval` recorded, read in a real browser, with
what the model wrote (quoted by failed expectations) kept inert."""

from __future__ import annotations

import uuid
from typing import Any

from playwright.async_api import Page, expect

from keel.api.cli.client import KeelClient
from keel.api.core.schemas.evals import EvalResultCreate
from keel.api.evals.runner import EvalRunner
from keel.api.evals.scenario import Scenario
from keel.worker.scripted.llm import Script, Turn
from tests.browser.conftest import screenshot
from tests.browser.test_console_runs import sign_in_with_link

HOSTILE = '<img src=x onerror="window.__pwned = 1">'


def scenario(name: str, report: dict[str, list[str]]) -> Scenario:
    return Scenario.model_validate(
        {
            "name": name,
            "agent": "investigate",
            "input": "What is here?",
            "model": {"configured": True},
            "expect": {"stop_reason": "final_answer", "report": report},
        }
    )


async def test_the_evals_page_lists_results_and_their_runs_inert(
    console_stack: Any, page: Page
) -> None:
    async with console_stack(Script(turns=[Turn(content=f"## Answer\n{HOSTILE}")])) as c:
        scenarios = [
            scenario("answers", {"contains": ["## Answer"]}),
            scenario("hostile", {"not_contains": [HOSTILE]}),
        ]
        eval_id = f"eval-browser-{uuid.uuid4().hex[:6]}"
        async with KeelClient(c.url, token=c.token("default", "local")) as client:
            runner = EvalRunner(client, c.workspace)
            report = await runner.run(scenarios, {s.name: None for s in scenarios})
            await client.record_eval(EvalResultCreate(id=eval_id, report=report))

        await sign_in_with_link(page, c.link)
        await page.click("nav a[data-page=evals]")
        row = page.locator(f"#evals-table tr[data-eval='{eval_id}']")
        await expect(row).to_contain_text("1/2")
        await expect(row.locator("[data-verdict]")).to_have_text("fail")
        await row.locator("a").click()

        hostile = page.locator("#eval-scenarios tr[data-scenario=hostile]")
        await expect(hostile.locator("[data-verdict]")).to_have_text("fail")
        await expect(hostile.locator(".failures li")).to_contain_text(
            f"expect.report.not_contains[0]: the report contains '{HOSTILE}'"
        )
        passing = page.locator("#eval-scenarios tr[data-scenario=answers]")
        await expect(passing.locator("[data-verdict]")).to_have_text("pass")
        assert await page.locator("main img").count() == 0
        assert await page.evaluate("window.__pwned") is None
        await screenshot(page, "evals")

        await hostile.locator("a", has_text="#1").click()
        await expect(page).to_have_url(
            f"{c.url}/console/runs/{report.scenarios[1].attempts[0].run_id}"
        )
        assert not page.script_errors  # type: ignore[attr-defined]
