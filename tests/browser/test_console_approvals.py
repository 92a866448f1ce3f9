"""The approvals inbox and tenancy, in a real browser: decide from the console, see the
API's answer at once, and the run act on exactly what was approved."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

import httpx
from playwright.async_api import Page, expect

from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.browser.conftest import finished, pending, screenshot
from tests.browser.test_console_runs import sign_in_with_link
from tests.conftest import auth_headers
from tests.integration.test_approvals import executions

LOCAL = auth_headers("default", "local")


async def start_build(http: httpx.AsyncClient, c: Any, headers: dict[str, str]) -> str:
    response = await http.post(
        "/v1/runs",
        headers=headers,
        json={"agent": "build", "input": "Make the change.", "workspace": str(c.workspace)},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def inbox_card(page: Page, run_id: str, ia: dict[str, Any]) -> Any:
    return page.locator(
        f"article.interaction[data-run-id='{run_id}'][data-interaction-id='{ia['id']}']"
    )


def tool_messages(request: dict[str, Any]) -> str:
    return json.dumps([m for m in request["messages"] if m.get("role") == "tool"])


async def test_approve_reject_and_answer_from_the_inbox(
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
            Turn(tool_calls=[ScriptedToolCall(name="bash", arguments={"command": ["ls", "-la"]})]),
            Turn(
                tool_calls=[
                    ScriptedToolCall(name="ask_user", arguments={"question": "Which database?"})
                ]
            ),
            Turn(content="Done: wrote notes/out.txt."),
        ]
    )
    async with console_stack(script) as c, httpx.AsyncClient(base_url=c.url, timeout=30) as http:
        run_id = await start_build(http, c, LOCAL)
        [ia] = await pending(http, run_id, headers=LOCAL)
        await sign_in_with_link(page, c.link)
        await page.click("nav a[data-page=approvals]")

        card = inbox_card(page, run_id, ia)
        await expect(card.locator("header strong")).to_have_text("write_file")
        await expect(card.locator("pre.payload")).to_have_text(
            '{"arguments":"{\\"content\\":\\"hello\\",\\"path\\":\\"notes/out.txt\\"}",'
            '"tool":"write_file"}'
        )
        await expect(card.locator(".payload-hash")).to_have_text(ia["payload_hash"])
        await expect(card.locator(".hash-check")).to_contain_text("matches")
        await expect(card.locator(".time-left")).to_contain_text("left")
        await screenshot(page, "approvals")
        await card.locator("button.approve").click()
        await expect(card.locator(".decision-result")).to_contain_text("Accepted")
        await expect(card.locator(".decision-result")).to_contain_text("approve by user:local")

        [bash] = await pending(http, run_id, headers=LOCAL, seen={ia["id"]})
        card = inbox_card(page, run_id, bash)
        await expect(card.locator("pre.arguments")).to_contain_text('"ls"')
        await card.locator("textarea.reason").fill("not on main, please")
        await card.locator("button.reject").click()
        await expect(card.locator(".decision-result")).to_contain_text("Accepted")

        [question] = await pending(http, run_id, headers=LOCAL, seen={ia["id"], bash["id"]})
        card = inbox_card(page, run_id, question)
        await expect(card.locator(".question")).to_have_text("Which database?")
        await card.locator("textarea.reason").fill("use the staging database")
        await card.locator("button.answer").click()
        await expect(card.locator(".decision-result")).to_contain_text("Accepted")

        run = await finished(http, run_id, headers=LOCAL)
        assert run["status"] == "completed"
        assert (c.workspace / "notes" / "out.txt").read_text() == "hello"
        assert await executions(database_url, run_id) == 1  # the approved write ran once
        assert "not on main, please" in tool_messages(c.llm.last_request(2))
        assert "use the staging database" in tool_messages(c.llm.last_request(3))

        # The run's own page shows the decisions in its timeline.
        await page.goto(f"{c.url}/console/runs/{run_id}")
        timeline = page.locator("ol.timeline")
        await expect(timeline.locator(".ev-done")).to_be_visible()
        assert await timeline.locator(".ev-interaction_resolved").count() == 3
        await expect(page.locator("#report-body")).to_contain_text("Done: wrote notes/out.txt.")


async def test_a_refused_decision_shows_the_api_answer(console_stack: Any, page: Page) -> None:
    script = Script(
        turns=[
            Turn(
                tool_calls=[
                    ScriptedToolCall(name="write_file", arguments={"path": "a.txt", "content": "x"})
                ]
            ),
            Turn(content="ok"),
        ]
    )
    alice = auth_headers("default", "alice")
    async with console_stack(script) as c, httpx.AsyncClient(base_url=c.url, timeout=30) as http:
        run_id = await start_build(http, c, alice)  # alice's run: only alice may decide
        [ia] = await pending(http, run_id, headers=alice)
        await sign_in_with_link(page, c.link)
        await page.goto(f"{c.url}/console/approvals")
        card = inbox_card(page, run_id, ia)
        await card.locator("button.approve").click()
        result = card.locator(".decision-result")
        await expect(result).to_contain_text("403 not allowed")
        assert await result.get_attribute("data-outcome") == "not allowed"
        # Decided elsewhere meanwhile: the console says so when asked to decide again.
        body = {"decision": "approve", "payload_hash": ia["payload_hash"]}
        took = await http.post(
            f"/v1/runs/{run_id}/interactions/{ia['id']}", headers=alice, json=body
        )
        assert took.status_code == 200
        await page.goto(f"{c.url}/console/runs/{run_id}")
        await expect(page.locator(".ev-interaction_resolved")).to_contain_text("approve")
        await finished(http, run_id, headers=alice)


async def test_another_tenants_run_is_not_reachable(console_stack: Any, page: Page) -> None:
    script = Script(
        turns=[
            Turn(
                tool_calls=[
                    ScriptedToolCall(name="write_file", arguments={"path": "b.txt", "content": "x"})
                ]
            ),
            Turn(content="ok"),
        ]
    )
    async with console_stack(script) as c, httpx.AsyncClient(base_url=c.url, timeout=30) as http:
        theirs = await start_build(http, c, LOCAL)
        [ia] = await pending(http, theirs, headers=LOCAL)
        await page.goto(f"{c.url}/console/signin")
        # A tenant of this test's own: the database is shared with other browser tests.
        other = f"acme-{uuid.uuid4().hex[:6]}"
        await page.fill("#token", c.token(other, "eve"))
        await page.click("#signin-form button[type=submit]")
        await expect(page.locator("#who-name")).to_have_text(f"eve @ {other}")
        await expect(page.locator("#runs-info")).to_contain_text("0 runs")
        assert await page.locator(f"tr[data-run-id='{theirs}']").count() == 0

        await page.goto(f"{c.url}/console/runs/{theirs}")
        await expect(page.locator("#error-title")).to_have_text("Not found")
        await expect(page.locator("#error-detail")).to_contain_text(f"No run {theirs}")
        await screenshot(page, "other-tenant")
        await page.goto(f"{c.url}/console/approvals")
        await expect(page.locator("#inbox-info")).to_contain_text("Nothing is waiting")
        assert await page.locator("article.interaction").count() == 0
        for path in (
            f"/v1/runs/{theirs}/events",
            f"/v1/runs/{theirs}/tool-outputs/1/call_1",
            f"/v1/runs/{theirs}/interactions",
        ):
            status = await page.evaluate(f"fetch('{path}').then(r => r.status)")
            assert status == 404, path
        # Tidy: let the run finish.
        body = {"decision": "reject", "text": "test over"}
        await http.post(f"/v1/runs/{theirs}/interactions/{ia['id']}", headers=LOCAL, json=body)
        await finished(http, theirs, headers=LOCAL)
        await asyncio.sleep(0)


async def test_cancel_a_waiting_run_from_its_page(console_stack: Any, page: Page) -> None:
    script = Script(
        turns=[
            Turn(
                tool_calls=[
                    ScriptedToolCall(name="write_file", arguments={"path": "c.txt", "content": "x"})
                ]
            ),
            Turn(content="never"),
        ]
    )
    async with console_stack(script) as c, httpx.AsyncClient(base_url=c.url, timeout=30) as http:
        run_id = await start_build(http, c, LOCAL)
        [ia] = await pending(http, run_id, headers=LOCAL)
        await sign_in_with_link(page, c.link)
        await page.goto(f"{c.url}/console/approvals")
        await expect(inbox_card(page, run_id, ia)).to_be_visible()
        await page.goto(f"{c.url}/console/runs/{run_id}")
        await expect(page.locator(".ev-interaction_pending")).to_contain_text(
            "Waiting for approval"
        )
        await page.click("#cancel-run")
        await expect(page.locator(".ev-cancelled")).to_be_visible(timeout=30_000)
        await expect(page.locator("#run-header [data-status]")).to_have_text("cancelled")
        # The request it waited on is closed on the page too: no buttons left to press.
        await expect(page.locator(".ev-interaction_resolved")).to_contain_text(
            "the run ended before anyone decided it"
        )
        await expect(page.locator(".ev-interaction_pending button")).to_have_count(0)
        assert not (c.workspace / "c.txt").exists()
        # A cancelled run waits on nothing: its request leaves the inbox.
        await page.goto(f"{c.url}/console/approvals")
        await expect(page.locator("#inbox-info")).to_be_visible()
        await expect(inbox_card(page, run_id, ia)).to_have_count(0)


async def test_approve_always_lets_the_same_call_run_without_asking(
    console_stack: Any, page: Page
) -> None:
    def write(content: str) -> Turn:
        args = {"path": "notes/a.txt", "content": content}
        return Turn(tool_calls=[ScriptedToolCall(name="write_file", arguments=args)])

    script = Script(turns=[write("v1"), write("v2"), Turn(content="Wrote it twice.")])
    async with console_stack(script) as c, httpx.AsyncClient(base_url=c.url, timeout=30) as http:
        run_id = await start_build(http, c, LOCAL)
        [ia] = await pending(http, run_id, headers=LOCAL)
        await sign_in_with_link(page, c.link)
        await page.goto(f"{c.url}/console/approvals")
        card = inbox_card(page, run_id, ia)
        await card.locator("button.approve-always").click()
        await expect(card.locator(".decision-result")).to_contain_text("approve_always")
        run = await finished(http, run_id, headers=LOCAL)
        assert run["status"] == "completed"
        assert (c.workspace / "notes" / "a.txt").read_text() == "v2"
        asked = (await http.get(f"/v1/runs/{run_id}/interactions", headers=LOCAL)).json()
        assert [i["id"] for i in asked] == [ia["id"]]  # the second write did not ask


async def test_a_run_waiting_for_approval_shows_waiting_in_the_list_and_on_its_page(
    console_stack: Any, page: Page
) -> None:
    script = Script(
        turns=[
            Turn(
                tool_calls=[
                    ScriptedToolCall(name="write_file", arguments={"path": "w.txt", "content": "x"})
                ]
            ),
            Turn(content="Wrote it."),
        ]
    )
    async with console_stack(script) as c, httpx.AsyncClient(base_url=c.url, timeout=30) as http:
        run_id = await start_build(http, c, LOCAL)
        [ia] = await pending(http, run_id, headers=LOCAL)
        await sign_in_with_link(page, c.link)
        await page.goto(f"{c.url}/console/runs")
        row = page.locator(f"tr.run-row[data-run-id='{run_id}'] [data-status]")
        await expect(row).to_have_text("waiting")
        await page.select_option("#filter-status", "waiting")
        await expect(page).to_have_url(re.compile(r"status=waiting"))
        await expect(row).to_have_text("waiting")
        await page.goto(f"{c.url}/console/runs/{run_id}")
        await expect(page.locator("#run-header [data-status]")).to_have_text("waiting")

        approved = await http.post(
            f"/v1/runs/{run_id}/interactions/{ia['id']}",
            headers=LOCAL,
            json={"decision": "approve", "payload_hash": ia["payload_hash"]},
        )
        assert approved.status_code == 200, approved.text
        assert (await finished(http, run_id, headers=LOCAL))["status"] == "completed"
        await page.goto(f"{c.url}/console/runs")
        await expect(row).to_have_text("completed")
