"""A run of an agent with memory shows what it recalled in its timeline: ids and
sources as text, never the fact and never markup."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import Page, expect

from keel.activities.store.memory_store import ExtractionCounts, MemoryStore, StoredFact
from keel.activities.store.run_store import Store
from keel.worker.scripted.llm import Script, Turn
from tests.browser.conftest import finished, screenshot
from tests.browser.test_console_pages import sign_in_as
from tests.conftest import auth_headers

AGENT = """---
name: helper
description: Answers questions and remembers what users tell it.
memory: true
---
You help with a small project. Answer briefly.
"""
HOSTILE_SESSION = "s-<img src=x onerror=\"window.__pwned='memory'\">"


async def test_a_recalled_memory_shows_in_the_timeline(
    console_stack: Any, page: Page, store: Store, tmp_path: Path
) -> None:
    tenant = f"mem-{uuid.uuid4().hex[:6]}"
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "helper.md").write_text(AGENT)
    await MemoryStore(store.pool).store_facts(
        tenant_id=tenant,
        user_id="alice",
        run_id=f"run-{uuid.uuid4().hex[:8]}",
        session_id=HOSTILE_SESSION,
        facts=[StoredFact(fact="The user prefers tabs for indentation.", kind="preference",
                          topic="indentation")],
        embedding_model=None,
        counts=ExtractionCounts(proposed=1),
    )  # fmt: skip
    [memory] = await MemoryStore(store.pool).recent(tenant, "alice", 10)
    script = Script(turns=[Turn(content="Tabs, as you said.")])
    async with (
        console_stack(script, agents_dir=agents) as c,
        httpx.AsyncClient(base_url=c.url, timeout=30) as http,
    ):
        who = auth_headers(tenant, "alice")
        body = {"agent": "helper", "input": "Which indentation do I prefer?",
                "workspace": str(c.workspace)}  # fmt: skip
        response = await http.post("/v1/runs", headers=who, json=body)
        assert response.status_code == 201, response.text
        run_id = response.json()["id"]
        assert (await finished(http, run_id, headers=who))["status"] == "completed"

        await sign_in_as(page, c, tenant, "alice")
        await page.goto(f"{c.url}/console/runs/{run_id}")
        event = page.locator("ol.timeline .ev-memory")
        await expect(event.locator("strong")).to_have_text("Recalled 1 memory")
        ref = event.locator(f'.memory-ref[data-memory-id="{memory.id}"]')
        await expect(ref).to_contain_text(memory.id)
        await expect(ref).to_contain_text(HOSTILE_SESSION)  # shown as text
        assert await event.locator("img, [onerror]").count() == 0
        await expect(event).not_to_contain_text("prefers tabs")  # ids, not the fact
        await expect(page.locator("ol.timeline .ev-done")).to_be_visible()
        assert await page.evaluate("window.__pwned") is None
        assert page.script_errors == []  # type: ignore[attr-defined]
        await screenshot(page, "run-memory")
