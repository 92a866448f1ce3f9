"""The Usage page's quota card in a real browser: a user sees their tenant's quota and
what is left; an admin sets one there, and the page shows it reached."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from playwright.async_api import Page, expect

from keel.worker.scripted.llm import Script, Turn
from tests.browser.conftest import finished, screenshot
from tests.browser.test_console_pages import sign_in_as
from tests.conftest import auth_headers


async def test_an_admin_sets_a_quota_on_the_usage_page_and_it_shows_reached(
    console_stack: Any, page: Page
) -> None:
    script = Script(turns=[Turn(content="Done.", prompt_tokens=1_000, completion_tokens=200)])
    async with console_stack(script) as c, httpx.AsyncClient(base_url=c.url, timeout=30) as http:
        tenant = f"quota-{uuid.uuid4().hex[:6]}"
        headers = auth_headers(tenant, "sam")
        created = await http.post(
            "/v1/runs",
            headers=headers,
            json={"agent": "investigate", "input": "Look.", "workspace": str(c.workspace)},
        )
        assert created.status_code == 201, created.text
        await finished(http, created.json()["id"], headers=headers)

        # A user without the admin scope: no quota yet, and no form to set one.
        await sign_in_as(page, c, tenant, "sam")
        await page.goto(f"{c.url}/console/usage")
        await expect(page.locator("#quota-none")).to_contain_text(f"Tenant {tenant} has no quota.")
        await expect(page.locator("#quota-form")).to_have_count(0)

        # An admin of the tenant sets a daily token quota below what it used today.
        await page.click("#sign-out")
        await expect(page.locator("#token")).to_be_visible()
        await sign_in_as(page, c, tenant, "root", "keel:admin")
        await page.goto(f"{c.url}/console/usage")
        await page.fill("#quota-tokens_per_day", "1000")
        await page.click("#quota-save")
        await expect(page.locator("#quota-note")).to_contain_text(f"Quota set for tenant {tenant}.")
        row = page.locator("#quota-table tr[data-period=day][data-measure=tokens]")
        await expect(row).to_contain_text("1,000")
        await expect(row).to_contain_text("1,200")
        await expect(row.locator("[data-remaining]")).to_have_text("0 (reached)")
        await expect(page.locator("#quota-refused")).to_contain_text(
            f"Tenant {tenant} has reached its daily token quota"
        )
        # A bad value is refused with the API's sentence, and nothing changes.
        await page.fill("#quota-tokens_per_day", "-3")
        await page.click("#quota-save")
        await expect(page.locator("#quota-note .error")).to_contain_text("tokens_per_day")
        await expect(row).to_contain_text("1,000")
        await screenshot(page, "usage-quota")
        assert not c.errors, c.errors
