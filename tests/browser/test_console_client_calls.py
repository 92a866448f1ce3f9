"""Client-executed calls (`local_tool_result`) in the console, in a real browser: shown in
the inbox and the run's timeline for what they are, inert, with nothing to decide; an
approve of one sent from the console session is refused with a sentence, and audited."""

from __future__ import annotations

from typing import Any

import httpx
import psycopg
from playwright.async_api import Page, expect

from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.browser.conftest import finished, pending, screenshot
from tests.browser.test_console_approvals import LOCAL, inbox_card
from tests.browser.test_console_runs import sign_in_with_link

HOSTILE = "<img src=x onerror=window.pwned=1>.md"

# What the console's own script would send: its session cookie and CSRF header.
CONSOLE_APPROVE = """async ([run, ia, hash]) => {
  const me = await (await fetch("/console/session")).json();
  const r = await fetch(`/v1/runs/${run}/interactions/${ia}`, {
    method: "POST",
    headers: {"content-type": "application/json", "x-keel-csrf": me.csrf},
    body: JSON.stringify({decision: "approve", payload_hash: hash}),
  });
  return [r.status, await r.json()];
}"""


async def refusals(database_url: str, subject: str) -> list[dict[str, Any]]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT detail FROM audit_log WHERE action = 'decision.refused' AND subject = %s",
            (subject,),
        )
        return [row[0] for row in await cur.fetchall()]


async def test_a_client_call_shows_as_the_client_s_to_answer_and_cannot_be_approved(
    console_stack: Any, page: Page, database_url: str
) -> None:
    script = Script(
        turns=[
            Turn(tool_calls=[ScriptedToolCall(name="read_file", arguments={"path": HOSTILE})]),
            Turn(content="Read it."),
        ]
    )
    async with console_stack(script) as c, httpx.AsyncClient(base_url=c.url, timeout=30) as http:
        created = await http.post(
            "/v1/runs",
            headers=LOCAL,
            json={
                "agent": "review",
                "input": "Read the file.",
                "workspace": str(c.workspace),
                "local_tools": ["read_file"],
            },
        )
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        [ia] = await pending(http, run_id, headers=LOCAL)
        assert ia["kind"] == "local_tool_result"
        await sign_in_with_link(page, c.link)
        await page.click("nav a[data-page=approvals]")

        card = inbox_card(page, run_id, ia)
        await expect(card.locator("header strong")).to_have_text("read_file")
        await expect(card.locator(".badge.client")).to_have_text("client tool")
        await expect(card.locator(".client-note")).to_contain_text(
            "Answered by the client that started the run (user:local)"
        )
        await expect(card.locator("pre.arguments")).to_contain_text(HOSTILE)  # as text
        assert await card.locator("button").count() == 0
        assert await card.locator("textarea").count() == 0
        assert await card.locator("img").count() == 0
        await screenshot(page, "client-call-inbox")

        # The console session's approve is refused before it reaches the run, and audited.
        status, body = await page.evaluate(CONSOLE_APPROVE, [run_id, ia["id"], ia["payload_hash"]])
        assert status == 422, body
        assert body["detail"] == (
            f"Interaction {ia['id']} is a read_file call that the client which started the "
            "run executes on its own files (a client-executed call, local_tool_result); it "
            "cannot be approved. That client answers it with the tool's output (decision "
            "`answer`, e.g. `keel run --local-tools`), or `reject`s it."
        )
        [refused] = await refusals(database_url, f"{run_id}/{ia['id']}")
        assert refused["decision"] == "approve" and "cannot be approved" in refused["reason"]

        await page.goto(f"{c.url}/console/runs/{run_id}")
        timeline = page.locator("ol.timeline")
        waiting = timeline.locator(".ev-interaction_pending")
        await expect(waiting).to_contain_text("Waiting for the client that started the run")
        await expect(waiting.locator("pre.arguments")).to_contain_text(HOSTILE)
        assert await waiting.locator("button, textarea, img").count() == 0

        # The client answers with the output; the timeline says who answered.
        answered = await http.post(
            f"/v1/runs/{run_id}/interactions/{ia['id']}",
            headers=LOCAL,
            json={"decision": "answer", "text": "# the file\n"},
        )
        assert answered.status_code == 200, answered.text
        await expect(timeline.locator(".ev-interaction_resolved")).to_contain_text(
            "Answered by the client that started the run"
        )
        await expect(timeline.locator(".ev-done")).to_be_visible()
        assert (await finished(http, run_id, headers=LOCAL))["status"] == "completed"
        assert await page.evaluate("window.pwned") is None
        assert page.script_errors == []  # type: ignore[attr-defined]
