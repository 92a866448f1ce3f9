"""The console shows the API's refusal as its sentence: a blank task from the start form
reads "The task is empty …", not `body.input: …`, and starts nothing."""

from __future__ import annotations

from typing import Any

import httpx
from playwright.async_api import Page, expect

from keel.api.core.plain_errors import BLANK_TASK
from keel.worker.scripted.llm import Script, Turn
from tests.browser.test_console_runs import sign_in_with_link
from tests.conftest import auth_headers


async def test_a_blank_task_from_the_start_form_reads_as_the_sentence_alone(
    console_stack: Any, page: Page
) -> None:
    async with console_stack(Script(turns=[Turn(content="A run that should never start.")])) as c:
        local = auth_headers("default", "local")
        async with httpx.AsyncClient(base_url=c.url, headers=local) as http:
            # The database is shared with other tests: what counts is that no run is added.
            before = [r["id"] for r in (await http.get("/v1/runs")).json()["runs"]]
        await sign_in_with_link(page, c.link)
        await page.click("#start-run summary")
        await page.fill("#start-input", "   ")
        await page.fill("#start-workspace", str(c.workspace))
        await page.click("#start-submit")
        error = page.locator("#start-error")
        await expect(error).to_have_text(BLANK_TASK)

        # A problem that says only what is wrong keeps the field it is about, not `body.`.
        await page.fill("#start-input", "Review it.")
        await page.fill("#start-workspace", "")
        await page.click("#start-submit")
        await expect(error).to_have_text("workspace: Must not be empty.")
        await expect(page).to_have_url(f"{c.url}/console/runs")
        assert page.script_errors == []  # type: ignore[attr-defined]

        async with httpx.AsyncClient(base_url=c.url, headers=local) as http:
            after = [r["id"] for r in (await http.get("/v1/runs")).json()["runs"]]
        assert after == before, after
        assert c.llm.total_requests == 0
