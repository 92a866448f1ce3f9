"""Sessions, schedules, usage, audit, paging and the event types not every run emits, in a
real browser against the real API."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from playwright.async_api import Page, expect

from keel.activities.store.run_store import Store
from keel.api.core.schedules.shown_time import in_zone
from keel.worker.scripted.llm import Script, Turn
from tests.browser.conftest import finished, screenshot
from tests.browser.test_console_runs import sign_in_with_link
from tests.conftest import auth_headers

ANSWER = "## Answer\n\nThe retry policy is set in `activities/llm/step.py`; see **max_retries**."


async def sign_in_as(page: Page, c: Any, tenant: str, sub: str, *scopes: str) -> None:
    await page.goto(f"{c.url}/console/signin")
    await page.fill("#token", c.token(tenant, sub, *scopes))
    await page.click("#signin-form button[type=submit]")
    await expect(page.locator("#who-name")).to_have_text(f"{sub} @ {tenant}")


async def test_a_session_message_streams_its_answer_into_the_chat(
    console_stack: Any, page: Page
) -> None:
    script = Script(
        turns=[Turn(content=ANSWER, stream_pause_s=0.3, prompt_tokens=200, completion_tokens=40)]
    )
    async with console_stack(script) as c:
        tenant = f"chat-{uuid.uuid4().hex[:6]}"
        await sign_in_as(page, c, tenant, "sam")
        await page.click("nav a[data-page=sessions]")
        await page.select_option("#session-agent", "investigate")
        await page.fill("#session-workspace", str(c.workspace))
        await page.click("#new-session button[type=submit]")
        await expect(page.locator("#chat-form")).to_be_visible()
        await page.fill("#chat-input", "Where is the retry policy set?")
        await page.select_option("#chat-on-busy", "enqueue")
        await page.click("#chat-send")
        await expect(page.locator(".bubble.user")).to_contain_text("Where is the retry policy")
        streaming = page.locator(".bubble.streaming .bubble-text")
        await expect(streaming).to_contain_text("Answer")
        assert len(await streaming.inner_text()) < len(ANSWER)  # arrived in pieces
        answer = page.locator(".bubble.assistant:not(.streaming)")
        await expect(answer.locator("h3")).to_have_text("Answer", timeout=30_000)
        await expect(answer.locator("code")).to_have_text("activities/llm/step.py")
        await screenshot(page, "session")

        # The tokens show on the usage page, per agent and per day.
        await page.click("nav a[data-page=usage]")
        row = page.locator("#usage-table tr[data-agent=investigate]")
        await expect(row).to_contain_text("240")
        await expect(page.locator(".chart-box canvas")).to_have_count(3)
        await screenshot(page, "usage")


# Each label a chart drew, as the box it covers on its canvas (Chart.js draws on a canvas,
# so the boxes come from its label items, measured with the font each was drawn in).
LABEL_BOXES = """() => [...document.querySelectorAll(".chart-box canvas")].map((canvas) => {
  const chart = Chart.getChart(canvas);
  const ctx = chart.ctx;
  const boxes = [];
  for (const [axis, scale] of Object.entries(chart.scales)) {
    for (const item of scale.getLabelItems()) {
      ctx.save();
      ctx.font = item.font.string;
      const width = ctx.measureText(String(item.label)).width;
      ctx.restore();
      const height = item.font.lineHeight;
      const [x, y] = item.options.translation;
      const left = { left: x, right: x - width }[item.options.textAlign] ?? x - width / 2;
      const top = { top: y, bottom: y - height }[item.options.textBaseline] ?? y - height / 2;
      boxes.push({ axis, label: String(item.label), left, top, right: left + width,
        bottom: top + height, rotation: item.options.rotation });
    }
  }
  const bars = chart.getDatasetMeta(0).data.map((bar) => bar.width);
  return { id: canvas.id, width: chart.width, height: chart.height, boxes, bars };
})"""


async def test_the_usage_charts_have_labels_that_do_not_overlap_and_separators(
    console_stack: Any, page: Page
) -> None:
    script = Script(turns=[Turn(content="Done.", prompt_tokens=12_000, completion_tokens=345)])
    async with console_stack(script) as c, httpx.AsyncClient(base_url=c.url, timeout=30) as http:
        tenant = f"usage-{uuid.uuid4().hex[:6]}"
        headers = auth_headers(tenant, "sam")
        created = await http.post(
            "/v1/runs",
            headers=headers,
            json={"agent": "investigate", "input": "Look.", "workspace": str(c.workspace)},
        )
        assert created.status_code == 201, created.text
        await finished(http, created.json()["id"], headers=headers)
        await sign_in_as(page, c, tenant, "sam")
        await page.goto(f"{c.url}/console/usage")
        await expect(page.locator("#usage-table tr[data-agent=investigate]")).to_contain_text(
            "12,345"
        )
        await expect(page.locator(".chart-box canvas")).to_have_count(3)
        await screenshot(page, "usage-charts")
        charts = {chart["id"]: chart for chart in await page.evaluate(LABEL_BOXES)}

        for chart in charts.values():
            boxes = chart["boxes"]
            assert boxes, chart["id"]
            for i, a in enumerate(boxes):
                assert a["rotation"] == 0, a
                assert 0 <= a["left"] and a["right"] <= chart["width"], (chart["id"], a)
                assert 0 <= a["top"] and a["bottom"] <= chart["height"], (chart["id"], a)
                for b in boxes[i + 1 :]:
                    apart = (
                        a["right"] <= b["left"]
                        or b["right"] <= a["left"]
                        or a["bottom"] <= b["top"]
                        or b["bottom"] <= a["top"]
                    )
                    assert apart, (chart["id"], a, b)

        daily = charts["chart-tokens-day"]
        # The month is 30 days of narrow bars, one labelled now and then, not one bar.
        assert len(daily["bars"]) == 30
        assert max(daily["bars"]) < daily["width"] / 10
        assert 4 <= len([b for b in daily["boxes"] if b["axis"] == "x"]) < 30
        values = [b["label"] for b in daily["boxes"] if b["axis"] == "y"]
        assert any(re.fullmatch(r"\d{1,3}(,\d{3})+", v) for v in values), values
        assert all(re.fullmatch(r"\d{1,3}(,\d{3})*", v) for v in values), values
        by_agent = charts["chart-tokens-agent"]
        assert [b["label"] for b in by_agent["boxes"] if b["axis"] == "y"] == ["investigate"]


async def test_create_pause_and_trigger_a_schedule(console_stack: Any, page: Page) -> None:
    script = Script(turns=[Turn(content="Nightly review: nothing new.")])
    async with console_stack(script) as c, httpx.AsyncClient(base_url=c.url, timeout=30) as http:
        tenant = f"sched-{uuid.uuid4().hex[:6]}"
        await sign_in_as(page, c, tenant, "sam")
        await page.click("nav a[data-page=schedules]")
        schedule_id = f"nightly-{uuid.uuid4().hex[:6]}"
        await page.fill("#sched-id", schedule_id)
        await page.select_option("#sched-agent", "investigate")
        await page.fill("#sched-input", "Review what changed")
        await page.fill("#sched-workspace", str(c.workspace))
        await page.fill("#sched-when", "0 2 * * *")
        fires = page.locator("#sched-preview .fire-time")
        await expect(fires).to_have_count(5)
        for text in await fires.all_inner_texts():
            assert text.endswith(" 02:00:00 UTC (UTC+00:00)"), text
        await page.fill("#sched-when", "61 2 * * *")
        await expect(page.locator("#sched-preview .error")).to_be_visible()
        await page.fill("#sched-when", "0 2 * * *")
        await expect(fires).to_have_count(5)
        await page.click("#sched-create")
        card = page.locator(f"article.schedule[data-schedule-id='{schedule_id}']")
        await expect(card).to_have_attribute("data-paused", "false")
        await expect(card).to_contain_text("next:")

        await card.locator("button.pause").click()
        await expect(card).to_have_attribute("data-paused", "true")
        await card.locator("button.resume").click()
        await expect(card).to_have_attribute("data-paused", "false")
        await card.locator("button.trigger").click()
        await expect(card.locator(".decision-result")).to_contain_text("Started")
        await screenshot(page, "schedules")

        await page.goto(f"{c.url}/console/runs?trigger=schedule")
        row = page.locator("tr.run-row").first
        await expect(row).to_contain_text(schedule_id, timeout=20_000)
        run_id = await row.get_attribute("data-run-id")
        assert run_id is not None
        await finished(http, run_id, headers=auth_headers(tenant, "sam"))
        await page.goto(f"{c.url}/console/runs?schedule={schedule_id}")
        await expect(page.locator("tr.run-row")).to_have_count(1)

        # Backfill the two nights before yesterday's end (the browser runs in UTC).
        await page.goto(f"{c.url}/console/schedules")
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        await card.locator(".bf-start").fill((today - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M"))
        await card.locator(".bf-end").fill(today.strftime("%Y-%m-%dT%H:%M"))
        await card.locator("button.backfill").click()
        await expect(card.locator(".decision-result")).to_contain_text("Backfilling 2 runs")
        await page.goto(f"{c.url}/console/runs?schedule={schedule_id}")
        await expect(page.locator("tr.run-row")).to_have_count(3, timeout=30_000)
        for row_id in await page.locator("tr.run-row").evaluate_all(
            "rows => rows.map(r => r.dataset.runId)"
        ):
            await finished(http, row_id, headers=auth_headers(tenant, "sam"))

        page.once("dialog", lambda dialog: dialog.accept())
        await page.goto(f"{c.url}/console/schedules")
        await card.locator("button.delete").click()
        await expect(card).to_have_count(0)


async def test_a_berlin_schedule_shows_its_times_in_berlin_as_the_cli_does(
    console_stack: Any, page: Page
) -> None:
    async with console_stack(Script(turns=[Turn(content="unused")])) as c:
        tenant = f"tz-{uuid.uuid4().hex[:6]}"
        await sign_in_as(page, c, tenant, "sam")
        await page.click("nav a[data-page=schedules]")
        # The form starts with an agent that only reads, not the one that writes files.
        agents = {
            a["name"]: a for a in await page.evaluate("fetch('/v1/agents').then(r => r.json())")
        }
        assert agents["build"]["read_only"] is False and agents["auto"]["read_only"] is False
        assert agents["review"]["read_only"] is True
        await expect(page.locator("#sched-agent")).to_have_value("review")
        schedule_id = f"berlin-{uuid.uuid4().hex[:6]}"
        await page.fill("#sched-id", schedule_id)
        await page.fill("#sched-input", "Review what changed")
        await page.fill("#sched-workspace", str(c.workspace))
        await page.fill("#sched-when", "0 2 * * *")
        await page.fill("#sched-zone", "Europe/Berlin")
        fires = page.locator("#sched-preview .fire-time")
        await expect(fires.first).to_contain_text("Europe/Berlin")
        await expect(fires).to_have_count(5)
        for text in await fires.all_inner_texts():
            assert re.search(r" 02:00:00 Europe/Berlin \(UTC\+0[12]:00\)$", text), text
        await page.click("#sched-create")
        card = page.locator(f"article.schedule[data-schedule-id='{schedule_id}']")
        await expect(card).to_contain_text("next:")

        async with httpx.AsyncClient(base_url=c.url, timeout=30) as http:
            made = await http.get(
                f"/v1/schedules/{schedule_id}", headers=auth_headers(tenant, "sam")
            )
        assert made.status_code == 200, made.text
        assert made.json()["agent"] == "review"
        # The same string the CLI prints for each of them.
        shown = [
            in_zone(datetime.fromisoformat(t), "Europe/Berlin")
            for t in made.json()["next_fire_times"][:3]
        ]
        await expect(card.locator(".muted.small").first).to_contain_text(
            "next: " + ", ".join(shown)
        )
        await page.goto(f"{c.url}/console/runs")
        await expect(page.locator("#start-agent")).to_have_value("review")


async def test_with_auth_off_every_page_says_so(console_stack: Any, page: Page) -> None:
    async with console_stack(Script(turns=[Turn(content="unused")]), auth_mode="off") as c:
        assert "#signin" not in c.link
        for path in ("runs", "approvals", "sessions", "schedules", "usage", "audit"):
            await page.goto(f"{c.url}/console/{path}")
            banner = page.locator("#auth-banner")
            await expect(banner).to_be_visible()
            await expect(banner).to_contain_text("Authentication is OFF")
        await screenshot(page, "auth-off")


async def insert_runs(store: Store, tenant: str, count: int) -> list[str]:
    """`count` finished runs of `tenant`, one a minute, newest last."""
    start = datetime.now(UTC) - timedelta(minutes=count)
    statuses = ["completed", "failed", "cancelled"]
    rows = [
        (
            f"run-{tenant}-{i:05d}",
            tenant,
            "review",
            "scripted",
            "user:pat",
            "schedule" if i % 10 == 0 else "api",
            "/tmp",
            f"task {i}",
            statuses[i % 3],
            start + timedelta(minutes=i),
        )
        for i in range(count)
    ]
    async with store.pool.connection() as conn, conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO runs (id, tenant_id, agent, model, requester, trigger, workspace,"
            " input, status, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            rows,
        )
    return [r[0] for r in rows]


async def test_paging_through_thousands_of_runs_with_filters(
    console_stack: Any, page: Page, store: Store
) -> None:
    tenant = f"many-{uuid.uuid4().hex[:6]}"
    ids = await insert_runs(store, tenant, 2500)
    async with console_stack(Script(turns=[Turn(content="unused")])) as c:
        await sign_in_as(page, c, tenant, "pat")
        rows = page.locator("tr.run-row")
        await expect(rows).to_have_count(50)
        await expect(rows.first).to_have_attribute("data-run-id", ids[-1])
        for _ in range(3):
            await page.click("#page-next")
        await expect(page.locator("#runs-info")).to_contain_text("Page 4")
        await expect(rows.first).to_have_attribute("data-run-id", ids[-151])
        await page.click("#page-prev")
        await expect(rows.first).to_have_attribute("data-run-id", ids[-101])

        await page.select_option("#filter-status", "failed")
        await expect(page.locator("#runs-info")).to_contain_text("Page 1")
        statuses = await page.locator("tr.run-row [data-status]").all_inner_texts()
        assert len(statuses) == 50 and set(statuses) == {"failed"}
        await page.select_option("#filter-trigger", "schedule")
        await expect(rows.first).to_contain_text("schedule")
        assert re.search(r"status=failed", page.url) and "trigger=schedule" in page.url
        first = await rows.first.get_attribute("data-run-id")
        assert first is not None and int(first.rsplit("-", 1)[1]) % 30 == 10  # failed, scheduled
        await screenshot(page, "runs")


async def test_compactions_and_child_runs_render_as_a_tree(
    console_stack: Any, page: Page, store: Store
) -> None:
    parent, child = f"run-tree-{uuid.uuid4().hex[:6]}", f"run-child-{uuid.uuid4().hex[:6]}"
    async with store.pool.connection() as conn:
        for run_id, agent, parent_id in ((parent, "review", None), (child, "explore", parent)):
            await conn.execute(
                "INSERT INTO runs (id, tenant_id, agent, model, requester, trigger, workspace,"
                " input, status, stop_reason, report, parent_run_id)"
                " VALUES (%s, 'default', %s, 'scripted', 'user:local', %s, '/tmp', 'go',"
                " 'completed', 'final_answer', 'merged', %s)",
                (run_id, agent, "parent" if parent_id else "api", parent_id),
            )
    events: list[tuple[str, int, str, dict[str, object]]] = [
        (parent, 1, "run_started", {"agent": "review", "model": "scripted", "trigger": "api"}),
        (
            parent,
            2,
            "compaction",
            {
                "step": 3,
                "reason": "threshold",
                "tokens_before": 90000,
                "tokens_after": 12000,
                "summary": "Task: review <b>x</b>",
            },
        ),
        (
            parent,
            3,
            "child_run",
            {
                "step": 3,
                "call_id": "call_1",
                "run_id": child,
                "agent": "explore",
                "status": "running",
                "pending_interactions": ["ia-1-2"],
                "task": "Explore pkg/",
            },
        ),
        (
            parent,
            4,
            "child_run",
            {"step": 3, "run_id": child, "agent": "explore", "status": "completed"},
        ),
        (parent, 5, "done", {"status": "completed", "stop_reason": "final_answer"}),
        (child, 1, "run_started", {"agent": "explore", "model": "scripted", "trigger": "parent"}),
        (child, 2, "message", {"step": 1, "content": "pkg/ has one module", "tool_calls": []}),
        (child, 3, "done", {"status": "completed", "stop_reason": "final_answer"}),
    ]
    for run_id, seq, type_, data in events:
        await store.put_event(run_id, seq, type_, data)
    async with console_stack(Script(turns=[Turn(content="unused")])) as c:
        await sign_in_with_link(page, c.link)
        await page.goto(f"{c.url}/console/runs/{parent}")
        compaction = page.locator(".ev-compaction")
        await expect(compaction).to_contain_text("tokens_before: 90000")
        await expect(compaction).to_contain_text("tokens_after: 12000")
        assert await compaction.locator("b").count() == 0  # the summary is text
        node = page.locator(f".child-run[data-child-run-id='{child}']")
        await expect(node).to_have_count(1)  # reported twice, shown once
        await expect(node).to_have_attribute("data-status", "completed")
        await expect(node).to_contain_text("explore")
        await expect(page.locator("ol.timeline").first).to_have_attribute("data-count", "5")
        await node.locator("button").click()
        nested = node.locator(f"ol.timeline[data-run-id='{child}']")
        await expect(nested.locator(".ev-message")).to_contain_text("pkg/ has one module")
        await expect(nested.locator(".ev-done")).to_be_visible()
        await screenshot(page, "run-tree")


async def test_audit_page_lists_and_verifies_the_chain(console_stack: Any, page: Page) -> None:
    async with console_stack(Script(turns=[Turn(content="unused")])) as c:
        await sign_in_with_link(page, c.link)  # the local user holds keel:admin
        await page.click("nav a[data-page=audit]")
        # This tenant's chain: other tests in this database break their own on purpose.
        await page.fill("#audit-tenant", "default")
        await page.click("#audit-verify")
        await expect(page.locator("#audit-verdict")).to_contain_text("Chain intact")
        await screenshot(page, "audit")
        # Without the admin scope the page is not offered and the API refuses it.
        await page.click("#sign-out")
        await sign_in_as(page, c, "default", "dora")
        assert await page.locator("nav a[data-page=audit]").count() == 0
        await page.goto(f"{c.url}/console/audit")
        await expect(page.locator("#error-title")).to_have_text("Error 403")
