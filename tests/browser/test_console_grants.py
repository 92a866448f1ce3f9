"""The console's Grants page in a real browser: a grant is listed inert, Revoke takes, and
the run it covered asks again at its next call."""

from __future__ import annotations

from typing import Any

import httpx
from playwright.async_api import Page, expect

from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.browser.conftest import finished, pending, screenshot
from tests.browser.test_console_approvals import LOCAL, start_build
from tests.browser.test_console_runs import sign_in_with_link

MARKUP = "<img src=x onerror=alert(1)>"


def ls(arg: str) -> ScriptedToolCall:
    return ScriptedToolCall(name="bash", arguments={"command": ["ls", arg]})


async def test_revoke_a_grant_from_the_console(console_stack: Any, page: Page) -> None:
    # The grant covers `ls <img…>*`; a question keeps the run waiting while the grant is
    # revoked in the browser; the next covered call then asks again.
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
        granted = await http.post(
            f"/v1/runs/{run_id}/interactions/{ia['id']}",
            headers=LOCAL,
            json={
                "decision": "approve_always",
                "payload_hash": ia["payload_hash"],
                "grant": {"kind": "run", "pattern": pattern},
            },
        )
        assert granted.status_code == 200, granted.text
        grant_id = granted.json()["grant"]["id"]
        [question] = await pending(http, run_id, headers=LOCAL, seen={ia["id"]})
        assert question["kind"] == "ask_user"

        await sign_in_with_link(page, c.link)
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
