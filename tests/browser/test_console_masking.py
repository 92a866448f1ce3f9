"""The console shows masked values: a run whose tool returned personal data, opened in
Chromium, shows the masked call, preview and full output, and none of the originals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect

from keel.activities.store.run_store import Store
from keel.api.cli.console_link import console_link
from tests.browser.test_console_runs import sign_in_with_link
from tests.integration.keel_http import MakeSettings, StartLLM, base_url
from tests.integration.test_masking import (
    assert_masked,
    hr_plugin,  # noqa: F401 (the fixture that installs the HR tool)
    lookup_script,
    masked_keel,
    masked_run,
)


@pytest.mark.usefixtures("hr_plugin")
async def test_the_run_page_shows_masked_values_only(
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    page: Page,
) -> None:
    llm = scripted(lookup_script())
    async with masked_keel(store, settings_for, llm, workspace) as keel:
        run_id = await masked_run(keel, workspace)
        url = base_url(keel.http)
        await sign_in_with_link(page, console_link(keel.settings, url))
        await page.goto(f"{url}/console/runs/{run_id}")
        timeline = page.locator("ol.timeline")
        await expect(timeline.locator(".ev-done")).to_be_visible(timeout=30_000)
        await expect(timeline.locator(".ev-tool_call")).to_have_count(
            3
        )  # the lookup, the denied one, the cached copy
        # The result shows inside its call's item; the first call's full output, opened.
        first = timeline.locator(".ev-tool_call .tool-result").first
        await first.locator("button.expand").click()
        full = first.locator("pre.output.full")
        await expect(full).to_contain_text('"ssn": "***-**-6789"')
        shown: Any = await timeline.inner_text()
        assert "+44 ** **** ****" in shown and "50000-100000" in shown
        assert_masked(shown, "the console's run page")
        assert_masked(await page.content(), "the run page's HTML")
    assert page.script_errors == []  # type: ignore[attr-defined]
