"""Grants in a real browser: "approve always" with a scope from the approval card, the
Grants page lists the grant inert, Revoke takes, and the run it covered asks again at its
next call."""

from __future__ import annotations

from typing import Any

import httpx
from playwright.async_api import Page, expect

from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.browser.conftest import finished, pending, screenshot
from tests.browser.test_console_approvals import LOCAL, inbox_card, start_build
from tests.browser.test_console_runs import sign_in_with_link

MARKUP = "<img src=x onerror=alert(1)>"


def ls(arg: str) -> ScriptedToolCall:
    return ScriptedToolCall(name="bash", arguments={"command": ["ls", arg]})


async def test_revoke_a_grant_from_the_console(console_stack: Any, page: Page) -> None:
    # The grant, made in the approval card, covers `ls '<img…>*`; a question keeps the run
    # waiting while the grant is revoked in the browser; the next covered call asks again.
    script = Script(
        turns=[
            Turn(tool_calls=[ls(f"{MARKUP}a")]),
            Turn(tool_calls=[ScriptedToolCall(name="ask_user", arguments={"question": "Go?"})]),
            Turn(tool_calls=[ls(f"{MARKUP}b")]),
            Turn(content="done"),
        ]
    )
    async with console_stack(script) as c, httpx.AsyncClient(base_url=c.url, timeout=30) as http:
        run_id = await start_build(http, c, LOCAL)
        [ia] = await pending(http, run_id, headers=LOCAL)
        assert ia["subject"] == f"ls '{MARKUP}a'"  # the command line, quoted
        pattern = f"ls '{MARKUP}*"
        await sign_in_with_link(page, c.link)
        await page.click("nav a[data-page=approvals]")
        card = inbox_card(page, run_id, ia)
        await card.locator(".grant-picker summary").click()
        await card.locator("select.grant-kind").select_option("run")
        await card.locator("input.grant-pattern-input").fill(pattern)
        await card.locator("button.approve-always").click()
        await expect(card.locator(".grant-made")).to_have_text(f" · grant run bash {pattern}")
        listed = (await http.get("/v1/grants", headers=LOCAL)).json()["grants"]
        [grant_id] = [g["id"] for g in listed if g["run_id"] == run_id]
        [question] = await pending(http, run_id, headers=LOCAL, seen={ia["id"]})
        assert question["kind"] == "ask_user"

        await page.click("nav a[data-page=grants]")
        row = page.locator(f"tr.grant[data-id='{grant_id}']")
        await expect(row.locator(".grant-pattern")).to_have_text(pattern)  # text, not markup
        assert await page.locator("#grants img").count() == 0
        await expect(row.locator(".grant-scope")).to_have_text(f"run {run_id}")
        await screenshot(page, "grants")
        await row.locator("button.grant-revoke").click()
        revoked = page.locator(f"tr.grant[data-id='{grant_id}']")
        await expect(revoked.locator(".grant-status")).to_have_text("revoked by user:local")
        await expect(revoked.locator("button.grant-revoke")).to_have_count(0)
        stored = (await http.get(f"/v1/grants/{grant_id}", headers=LOCAL)).json()
        assert stored["status"] == "revoked" and stored["revoked_by"] == "user:local"

        answered = await http.post(
            f"/v1/runs/{run_id}/interactions/{question['id']}",
            headers=LOCAL,
            json={"decision": "answer", "text": "yes"},
        )
        assert answered.status_code == 200, answered.text
        [again] = await pending(http, run_id, headers=LOCAL, seen={ia["id"], question["id"]})
        assert again["tool"] == "bash" and again["subject"] == f"ls '{MARKUP}b'"
        await http.post(
            f"/v1/runs/{run_id}/interactions/{again['id']}",
            headers=LOCAL,
            json={"decision": "reject"},
        )
        assert (await finished(http, run_id, headers=LOCAL))["status"] == "completed"
