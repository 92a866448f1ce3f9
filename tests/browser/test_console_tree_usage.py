"""The console shows what a run costs: its tree's tokens, its own beside them."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from playwright.async_api import Page, expect

from tests.browser.test_console_runs import sign_in_with_link
from tests.conftest import auth_headers
from tests.integration.test_subagents import delegating_review
from tests.integration.test_tree_usage import recorded_calls


async def test_the_runs_list_and_run_header_show_the_trees_recorded_usage(
    console_stack: Any, page: Page, store: Any
) -> None:
    async with console_stack(delegating_review()) as c:
        async with httpx.AsyncClient(base_url=c.url, headers=auth_headers()) as http:
            body = {"agent": "review", "input": "Review it", "workspace": str(c.workspace)}
            run_id = (await http.post("/v1/runs", json=body)).json()["id"]
            for _ in range(300):
                run = (await http.get(f"/v1/runs/{run_id}")).json()
                if run["status"] == "completed":
                    break
                await asyncio.sleep(0.1)
        assert run["status"] == "completed", run
        runs, prompt, completion = await recorded_calls(store, run_id)

        await sign_in_with_link(page, c.link)
        row = page.locator(f"tr[data-run-id='{run_id}']")
        await expect(row.locator("td.tokens")).to_have_text(str(prompt + completion))

        await page.goto(f"{c.url}/console/runs/{run_id}")
        await expect(page.locator("#total-tokens-in")).to_have_text(str(prompt))
        await expect(page.locator("#total-tokens-out")).to_have_text(str(completion))
        own = run["usage"]
        await expect(page.locator("#total-own")).to_contain_text(
            f"{own['prompt_tokens']} in · {own['completion_tokens']} out"
        )
        await expect(page.locator("#run-totals")).to_contain_text("Tokens in (with sub-agents)")
        await expect(page.locator("#run-totals")).to_contain_text(f"{runs - 1} sub-agent runs")
        assert page.script_errors == []  # type: ignore[attr-defined]
