"""A `secret_ref` answered in the console, in a real browser: a password field, the value
sent once and cleared, the backend called with it, and it shows nowhere afterwards —
not in the page, the run's events, the audit log or any table."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import Page, expect

from keel.worker.scripted.llm import Script, Turn
from tests.browser.conftest import finished, pending, screenshot
from tests.browser.test_console_approvals import LOCAL, inbox_card
from tests.browser.test_console_runs import sign_in_with_link
from tests.integration.test_user_credentials import lookups, readable_tables
from tests.integration.user_backend import UserBackend, helpdesk_file, serving


async def test_a_secret_given_in_the_console_reaches_the_tool_and_shows_nowhere(
    console_stack: Any, page: Page, tmp_path: Path, database_url: str
) -> None:
    secret = f"pat-{uuid.uuid4().hex}"
    script = Script(turns=[Turn(content="unused")], conversations=[lookups("local", pause_s=0)])
    async with serving(UserBackend()) as backend:
        helpdesk_file(tmp_path / "agents", backend.url)
        async with (
            console_stack(
                script,
                agents_dir=tmp_path / "agents",
                user_credentials={backend.origin: {"grant": "user_token"}},
            ) as c,
            httpx.AsyncClient(base_url=c.url, timeout=30) as http,
        ):
            created = await http.post(
                "/v1/runs",
                headers=LOCAL,
                json={
                    "agent": "helpdesk",
                    "input": "Look at the tickets of local.",
                    "workspace": str(c.workspace),
                },
            )
            assert created.status_code == 201, created.text
            run_id = created.json()["id"]
            [ia] = await pending(http, run_id, headers=LOCAL)
            assert ia["kind"] == "secret_ref"

            await sign_in_with_link(page, c.link)
            await page.click("nav a[data-page=approvals]")
            card = inbox_card(page, run_id, ia)
            await expect(card.locator("header strong")).to_have_text("Secret requested")
            field = card.locator("input.secret")
            await expect(field).to_have_attribute("type", "password")
            assert await card.locator("textarea").count() == 0  # nothing that echoes
            await field.fill(secret)
            await card.locator("button.give-secret").click()
            await expect(card.locator(".decision-result")).to_have_attribute(
                "data-outcome", "accepted"
            )
            await screenshot(page, "secret-given")

            run = await finished(http, run_id, headers=LOCAL)
            assert run["status"] == "completed", run
            assert [c.bearer for c in backend.calls_of("local")] == [f"Bearer {secret}"] * 2

            await page.goto(f"{c.url}/console/runs/{run_id}")
            await expect(page.locator("body")).to_contain_text("Both tickets of local are open.")
            events = await http.get(f"/v1/runs/{run_id}/events/stream", headers=LOCAL)
            audit = await http.get(
                "/v1/admin/audit",
                headers={"authorization": f"Bearer {c.token('default', 'root', 'keel:admin')}"},
            )
            assert audit.status_code == 200, audit.text
            for where, text in {
                "page": await page.content(),
                "SSE events": events.text,
                "audit": audit.text,
                "Postgres": await readable_tables(database_url),
            }.items():
                assert secret not in text, f"the secret is in the {where}"
            assert not c.errors, c.errors
