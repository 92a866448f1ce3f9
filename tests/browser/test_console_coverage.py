"""The console's runs list and run page say when a review read only part of its workspace."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from playwright.async_api import Page, expect

from keel.worker.scripted.llm import Script
from tests.browser.test_console_runs import sign_in_with_link
from tests.conftest import auth_headers


async def test_a_partial_review_shows_a_partial_badge_in_the_runs_list_and_on_its_page(
    console_stack: Any, page: Page
) -> None:
    script = Script(name="scripted", policy="plain_reviewer", context_window=16_384)
    async with console_stack(script, coverage_plans=True, model_context_window=16_384) as c:
        async with httpx.AsyncClient(base_url=c.url, headers=auth_headers()) as http:
            # A ceiling too small for any part: nothing is read, and the run says so.
            body = {
                "agent": "review",
                "input": "Review it",
                "workspace": str(c.workspace),
                "max_total_tokens": 1000,
            }
            created = await http.post("/v1/runs", json=body)
            assert created.status_code in (200, 201, 202), created.text
            run_id = created.json()["id"]
            for _ in range(300):
                run = (await http.get(f"/v1/runs/{run_id}")).json()
                if run["status"] == "completed":
                    break
                await asyncio.sleep(0.1)
        assert run["status"] == "completed", run
        coverage = run["coverage"]
        assert coverage["status"] == "partial" and coverage["files_covered"] == 0

        await sign_in_with_link(page, c.link)
        text = f"partial · 0 of {coverage['files_total']} files"
        await page.goto(f"{c.url}/console/runs")
        listed = page.locator(f'tr.run-row[data-run-id="{run_id}"] .run-coverage')
        await expect(listed).to_have_text(text)
        await expect(listed).to_have_attribute("data-coverage", "partial")
        await expect(listed).to_have_attribute("title", f"{text} (stop reason budget)")
        await page.goto(f"{c.url}/console/runs/{run_id}")
        badge = page.locator("#run-coverage")
        await expect(badge).to_have_text(text)
        await expect(badge).to_have_attribute("data-coverage", "partial")
        assert page.script_errors == []  # type: ignore[attr-defined]
