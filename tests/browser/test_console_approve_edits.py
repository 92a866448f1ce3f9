"""Approve with edits in a real browser: edit the arguments on the card, see the diff,
have an edit the gate refuses answered with its reason, approve, and the edited call runs."""

from __future__ import annotations

import json
from typing import Any

import httpx
from playwright.async_api import Page, expect

from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.browser.conftest import finished, pending, screenshot
from tests.browser.test_console_approvals import LOCAL, inbox_card, start_build, tool_messages
from tests.browser.test_console_runs import sign_in_with_link
from tests.integration.test_approvals import executions


async def test_edit_the_arguments_see_the_diff_and_the_edited_call_runs(
    console_stack: Any, page: Page, database_url: str
) -> None:
    script = Script(
        turns=[
            Turn(
                tool_calls=[
                    ScriptedToolCall(
                        name="write_file", arguments={"path": "notes/out.txt", "content": "hello"}
                    )
                ]
            ),
            Turn(content="Done."),
        ]
    )
    async with console_stack(script) as c, httpx.AsyncClient(base_url=c.url, timeout=30) as http:
        run_id = await start_build(http, c, LOCAL)
        [ia] = await pending(http, run_id, headers=LOCAL)
        await sign_in_with_link(page, c.link)
        await page.goto(f"{c.url}/console/approvals")
        card = inbox_card(page, run_id, ia)
        await card.locator("details.edit summary").click()
        editor = card.locator("textarea.edit-arguments")
        await expect(editor).to_have_value(json.dumps(ia["arguments"], indent=2))

        await editor.fill(json.dumps({"path": "../outside.txt", "content": "hello"}))
        await expect(card.locator(".edit-diff")).to_contain_text(
            '~ path: "notes/out.txt" → "../outside.txt"'
        )
        await card.locator("button.approve").click()
        result = card.locator(".decision-result")
        await expect(result).to_contain_text("422 refused")
        await expect(result).to_contain_text("outside the run's workspace")

        await editor.fill(json.dumps({"path": "notes/edited.txt", "content": "from the console"}))
        diff = card.locator(".edit-diff li")
        await expect(diff).to_have_text(
            [
                '~ content: "hello" → "from the console"',
                '~ path: "notes/out.txt" → "notes/edited.txt"',
            ]
        )
        await screenshot(page, "approve-with-edits")
        await card.locator("button.approve").click()
        await expect(result).to_contain_text("Accepted")
        await expect(result).to_contain_text("with changes")

        run = await finished(http, run_id, headers=LOCAL)
        assert run["status"] == "completed"
    assert (c.workspace / "notes" / "edited.txt").read_text() == "from the console"
    assert not (c.workspace / "notes" / "out.txt").exists()
    assert not (c.workspace.parent / "outside.txt").exists()
    assert await executions(database_url, run_id) == 1
    assert "with changes" in tool_messages(c.llm.last_request(1))
