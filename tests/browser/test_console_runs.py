"""The console's sign-in, runs and run timeline, in a real browser."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import httpx
import jwt
from playwright.async_api import Page, expect

from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.browser.conftest import screenshot
from tests.conftest import JWT_SECRET, auth_headers

HOSTILE = (
    "# Findings\n\n"
    "<script>window.__pwned = 'script'</script>\n\n"
    '<img src="x" onerror="window.__pwned = \'img\'">\n\n'
    "[click me](javascript:window.__pwned='link') and "
    "[data](data:text/html,<script>window.__pwned=1</script>) and "
    "[docs](https://example.com/docs)\n\n"
    "<b>raw html</b> with **bold** and `code`\n\n"
    "- one\n- two\n"
)


async def sign_in_with_link(page: Page, link: str) -> None:
    await page.goto(link)
    await expect(page.locator("#who-name")).to_have_text("local @ default")
    await expect(page).to_have_url(re.compile(r"/console/runs$"))


async def test_sign_in_link_makes_an_httponly_session_and_sign_out_ends_it(
    console_stack: Any, page: Page
) -> None:
    async with console_stack(Script(turns=[Turn(content="unused")])) as c:
        assert "#signin=" in c.link
        await sign_in_with_link(page, c.link)
        assert "#signin" not in page.url  # the token leaves the address bar at once
        cookies = await page.context.cookies()
        session = next(k for k in cookies if k["name"] == "keel_console")
        assert session["httpOnly"] and session["sameSite"] == "Strict"
        assert "keel_console" not in await page.evaluate("document.cookie")
        # The cookie reads; a write without the page's CSRF header is refused.
        status = await page.evaluate("fetch('/v1/runs').then(r => r.status)")
        assert status == 200
        forged = await page.evaluate(
            """fetch('/v1/runs', {method: 'POST', headers: {'content-type': 'application/json'},
               body: JSON.stringify({agent: 'review', input: 'x', workspace: '.'})})
               .then(r => r.status)"""
        )
        assert forged == 401
        await screenshot(page, "runs-empty")

        await page.click("#sign-out")
        await expect(page.locator("#signin-form")).to_be_visible()
        assert await page.evaluate("fetch('/v1/runs').then(r => r.status)") == 401
        # A copied cookie stops working too.
        async with httpx.AsyncClient(
            base_url=c.url, cookies={"keel_console": session["value"]}
        ) as http:
            replay = await http.get("/v1/runs")
            assert replay.status_code == 401

        # A pasted bearer token signs in as its own caller.
        await page.fill("#token", c.token("default", "carol"))
        await page.click("#signin-form button[type=submit]")
        await expect(page.locator("#who-name")).to_have_text("carol @ default")
        await screenshot(page, "sign-in")


async def test_an_expired_link_and_a_bad_token_are_refused_with_a_sentence(
    console_stack: Any, page: Page
) -> None:
    async with console_stack(Script(turns=[Turn(content="unused")])) as c:
        now = int(time.time())
        stale = jwt.encode(
            {
                "tenant_id": "default",
                "sub": "local",
                "iat": now - 2000,
                "exp": now - 1000,
                "keel_use": "console-sign-in",
            },
            JWT_SECRET,
            algorithm="HS256",
        )
        await page.goto(f"{c.url}/console/#signin={stale}")
        await expect(page.locator("#signin-error")).to_contain_text("expired")
        await page.fill("#token", "not-a-jwt")
        await page.click("#signin-form button[type=submit]")
        await expect(page.locator("#signin-error")).to_contain_text("JWT")
        # Pages need a session: straight to sign-in.
        await page.goto(f"{c.url}/console/approvals")
        await expect(page.locator("#signin-form")).to_be_visible()


async def test_a_run_started_in_the_console_fills_its_timeline_live_and_renders_inert(
    console_stack: Any, page: Page
) -> None:
    script = Script(
        turns=[
            Turn(
                tool_calls=[ScriptedToolCall(name="read_file", arguments={"path": "evil.md"})],
                delay_s=0.5,
                prompt_tokens=120,
                completion_tokens=15,
            ),
            Turn(content=HOSTILE, stream_pause_s=0.4, prompt_tokens=300, completion_tokens=80),
        ]
    )
    async with console_stack(script) as c:
        (c.workspace / "evil.md").write_text(
            "<script>window.__pwned='tool'</script>\n<img src=x onerror=\"window.__pwned='t'\">\n"
            + "x" * 5000
        )
        await sign_in_with_link(page, c.link)
        await page.click("#start-run summary")
        await page.select_option("#start-agent", "investigate")
        await page.fill("#start-input", "Look at evil.md")
        await page.fill("#start-workspace", str(c.workspace))
        await page.click("#start-submit")
        await expect(page.locator("#run-id")).to_be_visible()
        run_id = await page.locator("#run-id").inner_text()

        # Live: the tool call and its result appear, then the answer streams in pieces.
        timeline = page.locator("ol.timeline")
        await expect(timeline.locator(".ev-tool_call .tool-name")).to_have_text("read_file")
        await expect(timeline.locator(".ev-tool_call .arguments")).to_contain_text('"evil.md"')
        preview = timeline.locator(".ev-tool_call pre.output.preview")
        await expect(preview).to_contain_text("<script>window.__pwned='tool'</script>")
        live = timeline.locator(".live-answer .live-text")
        await expect(live).to_contain_text("Findings")
        partial = await live.inner_text()
        assert len(partial) < len(HOSTILE)  # seen before the whole answer arrived
        await expect(timeline.locator(".ev-done")).to_be_visible(timeout=30_000)
        await expect(page.locator("#run-stop-reason")).to_have_text("final_answer")
        await expect(page.locator("#total-tokens-in")).to_have_text("420")
        await expect(page.locator("#total-tokens-out")).to_have_text("95")
        await expect(timeline.locator(".ev-message .usage").first).to_contain_text("120 in")

        # The full stored output expands from the preview.
        await timeline.locator("button.expand").click()
        full = timeline.locator("pre.output.full")
        await expect(full).to_contain_text("x" * 5000)

        # The report is Markdown, rendered inert.
        report = page.locator("#report-body")
        await expect(report.locator("h2")).to_have_text("Findings")
        await expect(report.locator("strong")).to_have_text("bold")
        await expect(report).to_contain_text("<script>window.__pwned = 'script'</script>")
        await expect(report).to_contain_text("<b>raw html</b>")
        assert await report.locator("script, img, b, iframe").count() == 0
        assert await page.locator("main [onerror], main script").count() == 0
        assert await page.locator("a[href^='javascript'], a[href^='data']").count() == 0
        await expect(report.locator("a[href='https://example.com/docs']")).to_have_text("docs")
        await report.locator(".unsafe-link").first.click()
        await page.wait_for_timeout(300)
        assert await page.evaluate("window.__pwned") is None
        assert page.script_errors == []  # type: ignore[attr-defined]
        await screenshot(page, "run")

        # The run is in the list, newest first, with its status.
        await page.click("nav a[data-page=runs]")
        row = page.locator(f"tr[data-run-id='{run_id}']")
        await expect(row.locator("[data-status]")).to_have_text("completed")


async def test_console_pages_carry_a_strict_content_security_policy(console_stack: Any) -> None:
    async with console_stack(Script(turns=[Turn(content="unused")])) as c:
        async with httpx.AsyncClient(base_url=c.url) as http:
            for path in ("/console/", "/console/runs/x", "/console/assets/app.js"):
                response = await http.get(path)
                assert response.status_code == 200, path
                csp = response.headers["content-security-policy"]
                assert "script-src 'self'" in csp and "unsafe-inline" not in csp
                assert response.headers["x-content-type-options"] == "nosniff"
            html = (await http.get("/console/")).text
            assert "<script>" not in html and "onload" not in html
            # Only files of assets/ are served; anything else under /console is the page shell.
            sneaky = await http.get("/console/assets/..%2Fpages.py")
            assert "def _shell" not in sneaky.text and "<html" in sneaky.text
            assert (await http.get("/console/assets/missing.js")).status_code == 404
            assert (await http.get("/console/assets/.hidden.js")).status_code == 404
            # Signing in from another origin is refused (login CSRF).
            cross = await http.post(
                "/console/session",
                json={"token": c.token()},
                headers={"origin": "https://evil.example"},
            )
            assert cross.status_code == 403
            # A bearer token still works everywhere, with no CSRF header.
            ok = await http.get("/v1/runs", headers=auth_headers())
            assert ok.status_code == 200


async def test_the_runs_page_lists_top_level_runs_and_links_each_count_to_its_children(
    console_stack: Any, page: Page
) -> None:
    from tests.integration.test_run_list import delegating_review

    async with console_stack(delegating_review()) as c:
        async with httpx.AsyncClient(base_url=c.url, headers=auth_headers()) as http:
            body = {"agent": "review", "input": "Review it", "workspace": str(c.workspace)}
            run_id = (await http.post("/v1/runs", json=body)).json()["id"]
            for _ in range(300):
                run = (await http.get(f"/v1/runs/{run_id}")).json()
                if run["status"] == "completed":
                    break
                await asyncio.sleep(0.1)
        assert run["status"] == "completed", run
        kids = [f"{run_id}-task-2-2", f"{run_id}-task-2-3"]

        await sign_in_with_link(page, c.link)
        row = page.locator(f"tr[data-run-id='{run_id}']")
        await expect(row.locator("td.children")).to_have_text("2")
        assert await page.locator(f"tr[data-run-id='{kids[0]}']").count() == 0

        await row.locator("td.children a").click()
        await expect(page).to_have_url(re.compile(rf"/console/runs\?parent={run_id}$"))
        await expect(page.locator("#runs-parent")).to_contain_text(run_id)
        await expect(page.locator("tr.run-row")).to_have_count(2)
        for kid in kids:
            await expect(page.locator(f"tr[data-run-id='{kid}']")).to_be_visible()

        await page.goto(f"{c.url}/console/runs")
        await page.check("#filter-children")
        await expect(page).to_have_url(re.compile(r"children=include"))
        await expect(page.locator(f"tr[data-run-id='{kids[1]}']")).to_be_visible()
        assert page.script_errors == []  # type: ignore[attr-defined]


async def test_a_sub_agent_prompt_reads_as_its_text_in_the_timeline(
    console_stack: Any, page: Page
) -> None:
    from tests.integration.test_subagents import child, task

    prompt = 'CHILD-A: read pkg/core.py.\nThen list its "TODO" lines.\n\n<b>not bold</b>'
    script = Script(
        turns=[
            Turn(tool_calls=[task("explore", prompt)]),
            Turn(content="## Files reviewed\n- pkg/core.py\n"),
        ],
        conversations=[child("CHILD-A", "pkg/core.py", "- pkg/core.py:2 TODO")],
    )
    async with console_stack(script) as c:
        async with httpx.AsyncClient(base_url=c.url, headers=auth_headers()) as http:
            body = {"agent": "review", "input": "Review it", "workspace": str(c.workspace)}
            run_id = (await http.post("/v1/runs", json=body)).json()["id"]
            for _ in range(300):
                run = (await http.get(f"/v1/runs/{run_id}")).json()
                if run["status"] == "completed":
                    break
                await asyncio.sleep(0.1)
        assert run["status"] == "completed", run

        await sign_in_with_link(page, c.link)
        await page.goto(f"{c.url}/console/runs/{run_id}")
        call = page.locator(".ev-tool_call").filter(has=page.locator(".task-prompt"))
        await expect(call.locator(".task-agent")).to_have_text("explore")
        shown = await call.locator(".task-prompt").inner_text()
        assert shown == prompt  # its own line breaks and quotes, not JSON with \n
        assert "\\n" not in await call.inner_text()
        assert await call.locator("b").count() == 0  # text, never markup
        await screenshot(page, "sub-agent-prompt")
        assert page.script_errors == []  # type: ignore[attr-defined]
