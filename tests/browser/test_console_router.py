"""The console starts a routed run (`auto`) and its timeline shows the router's decision."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page, expect

from keel.worker.scripted.llm import Script, Turn
from tests.browser.conftest import screenshot
from tests.browser.test_console_runs import sign_in_with_link

HOSTILE_REQUEST = "Investigate the parser <img src=x onerror=\"window.__pwned='route'\">"


async def test_a_routed_run_shows_its_decision_and_its_child(
    console_stack: Any, page: Page
) -> None:
    async with console_stack(Script(turns=[Turn(content="## Answer\nThe parser is fine.")])) as c:
        await sign_in_with_link(page, c.link)
        await page.click("#start-run summary")
        await page.select_option("#start-agent", "auto")
        await page.fill("#start-input", HOSTILE_REQUEST)
        await page.fill("#start-workspace", str(c.workspace))
        await page.click("#start-submit")
        await expect(page.locator("#run-id")).to_be_visible()

        timeline = page.locator("ol.timeline")
        decision = timeline.locator(".ev-route_decision")
        await expect(decision.locator("strong")).to_have_text("Routed to investigate")
        await expect(decision).to_contain_text("matches what investigate does")
        await expect(timeline.locator(".ev-done")).to_be_visible(timeout=30_000)
        await expect(page.locator("#report-body")).to_contain_text("The parser is fine.")
        child = timeline.locator(".ev-child_run").first
        await expect(child).to_contain_text("investigate")
        await expect(child).to_contain_text("completed")
        assert await page.locator("main [onerror], main script").count() == 0
        assert await page.evaluate("window.__pwned") is None
        assert page.script_errors == []  # type: ignore[attr-defined]
        await screenshot(page, "run-routed")
