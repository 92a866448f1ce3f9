"""Fork from a step in a real browser: the control on a step of the timeline asks for a
message, forks, and opens the new run, whose model reads the steps kept and the message."""

from __future__ import annotations

from typing import Any

import httpx
from playwright.async_api import Page, expect

from keel.worker.scripted.llm import Conversation, ScriptedToolCall, Turn
from tests.browser.conftest import finished, pending, screenshot
from tests.browser.test_console_approvals import LOCAL, start_build
from tests.browser.test_console_runs import sign_in_with_link
from tests.integration.test_forks import six_steps

WRITE = Turn(
    tool_calls=[
        ScriptedToolCall(name="write_file", arguments={"path": "notes/x.txt", "content": "x"})
    ]
)
HINT = "<b>Read the README</b> first."
"""Markup on purpose: the console shows what a person typed as text."""


async def test_fork_from_a_step_of_the_timeline(console_stack: Any, page: Page) -> None:
    # The build run of the last part waits on an approval at its first step.
    waits = Conversation(match="Make the change.", turns=[WRITE, Turn(content="Done.")])
    script = six_steps().model_copy(update={"conversations": [waits]})
    async with (
        console_stack(script) as c,
        httpx.AsyncClient(base_url=c.url, timeout=30) as http,
    ):
        created = await http.post(
            "/v1/runs",
            headers=LOCAL,
            json={
                "agent": "investigate",
                "input": "Why does add fail?",
                "workspace": str(c.workspace),
            },
        )
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        await finished(http, run_id, headers=LOCAL)
        fourth = c.llm.last_request(3)
        c.llm.reset()

        await sign_in_with_link(page, c.link)
        await page.goto(f"{c.url}/console/runs/{run_id}")
        steps = page.locator("li.step")
        await expect(steps).to_have_count(6)
        step = page.locator("li.step[data-step='3']")
        await step.locator("button.fork-open").click()
        await step.locator("textarea.fork-message").fill(HINT)
        await screenshot(page, "fork-from-here")
        await step.locator("button.fork-send").click()

        await expect(page.locator("#forked-from")).to_have_text(run_id)
        await expect(page.locator("#run-header")).to_contain_text("at step 3")
        fork_id = await page.locator("#run-id").text_content()
        assert fork_id and fork_id != run_id
        await expect(page.locator("li.step")).to_have_count(3, timeout=30_000)
        fork = await finished(http, fork_id, headers=LOCAL)
        assert (fork["forked_from"], fork["forked_at_step"]) == (run_id, 3), fork
        first = c.llm.last_request(3)
        assert first["messages"] == [*fourth["messages"], {"role": "user", "content": HINT}]

        # The message is shown as the text it is (the fork's task), never as markup.
        await expect(page.locator("pre.input")).to_have_text(HINT)
        assert await page.locator("#run-header b, .timeline b").count() == 0

        # A step whose call waits on a decision cannot be forked yet: the sentence shows.
        build = await start_build(http, c, LOCAL)
        await pending(http, build, headers=LOCAL)
        await page.goto(f"{c.url}/console/runs/{build}")
        waiting = page.locator("li.step[data-step='1']")
        await waiting.locator("button.fork-open").click()
        await waiting.locator("button.fork-send").click()
        await expect(waiting.locator(".fork-error")).to_contain_text(
            "tool calls without results yet"
        )
        await expect(page.locator("#run-id")).to_have_text(build)
