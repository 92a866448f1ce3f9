"""The console with a long run: how fast a run of 2,000 events opens, and whether the page
stays responsive while it fills in.

    .venv/bin/python -m bench.console_timeline [--events 2000]

Starts a Temporal dev server, a fresh Postgres database and the API on 127.0.0.1, stores a
finished run of `--events` events (500 steps of model call, usage, tool call and result
with 200-character previews) and opens it in Debian's headless Chromium (/usr/bin/chromium)
through the console. Reports: the time from navigation until every event is on the page,
the longest gap between animation frames while it filled in (what a user would feel as a
freeze), the time from clicking "show full output" on the last tool call to the output
being shown, and the page's DOM size.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.step_overhead import DEFAULT_ADMIN_URL, BenchError, fresh_database
from keel.activities.store.run_store import Store, StoreUnavailable
from keel.api.cli.console_link import console_link
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings, settings_from
from keel.worker.dev_stack import StackError, TemporalDevServer, free_port
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS

JWT_SECRET = "bench-secret-0123456789abcdef0123456789abcdef"
MAX_EVENTS = 20_000
PREVIEW = "line: nothing to see here, " * 8

# Watches animation frames while the timeline fills in: the longest gap is the worst freeze.
FRAME_WATCH = """
window.__gaps = [];
let last = performance.now();
function tick(now) {
  // Counted from the first event on the page: the page's own start-up is not the timeline's.
  if (document.querySelector('ol.timeline')?.dataset.count) window.__gaps.push(now - last);
  last = now;
  requestAnimationFrame(tick);
}
requestAnimationFrame(tick);
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.console_timeline")
    parser.add_argument("--events", type=int, default=2000, help="events in the run (2000)")
    args = parser.parse_args(argv)
    if not 4 <= args.events <= MAX_EVENTS:
        parser.error(f"--events must be between 4 and {MAX_EVENTS}.")
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"console_timeline: {CHROMIUM} is absent; apt-get install chromium.")
    try:
        asyncio.run(bench(args.events))
    except (BenchError, StackError, StoreUnavailable) as exc:
        raise SystemExit(f"console_timeline: {exc}") from None


async def store_run(store: Store, events: int) -> str:
    run_id = f"run-bench-{uuid.uuid4().hex[:8]}"
    async with store.pool.connection() as conn:
        await conn.execute(
            "INSERT INTO runs (id, tenant_id, agent, model, requester, trigger, workspace, input,"
            " status, stop_reason, report, steps, tool_calls)"
            " VALUES (%s, 'default', 'review', 'scripted', 'user:local', 'api', '/tmp', 'Review',"
            " 'completed', 'final_answer', '# Report\n\nAll good.', %s, %s)",
            (run_id, events // 4, events // 4),
        )
    seq = 1
    await store.put_event(run_id, seq, "run_started", {"agent": "review", "model": "scripted"})
    step = 0
    while seq < events - 1:
        step += 1
        call = f"call_{step}"
        batch: list[tuple[str, dict[str, object]]] = [
            ("message", {"step": step, "content": "", "tool_calls": [{"name": "read_file"}]}),
            (
                "usage",
                {"step": step, "prompt_tokens": 900, "completion_tokens": 30, "latency_ms": 40},
            ),
            (
                "tool_call",
                {
                    "step": step,
                    "call_id": call,
                    "name": "read_file",
                    "arguments": {"path": f"src/f{step}.py"},
                },
            ),
            (
                "tool_result",
                {
                    "step": step,
                    "call_id": call,
                    "name": "read_file",
                    "is_error": False,
                    "size": 4000,
                    "preview": PREVIEW,
                },
            ),
        ]
        for type_, data in batch:
            if seq >= events - 1:
                break
            seq += 1
            await store.put_event(run_id, seq, type_, data)
    await store.put_event(
        run_id, seq + 1, "done", {"status": "completed", "stop_reason": "final_answer"}
    )
    return run_id


async def bench(events: int) -> None:
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.async_api import async_playwright

    admin_url = Settings().database_url or DEFAULT_ADMIN_URL
    with tempfile.TemporaryDirectory(prefix="keel-bench-") as tmp:
        root = Path(tmp)
        temporal = TemporalDevServer(
            db_file=root / "temporal.sqlite", port=free_port(), log_file=root / "temporal.log"
        )
        await temporal.start()
        try:
            async with fresh_database(admin_url) as database_url:
                store = await Store.open(database_url)
                try:
                    await store.migrate()
                    run_id = await store_run(store, events)
                    settings = settings_from(
                        temporal_address=temporal.address,
                        database_url=database_url,
                        data_dir=root / "data",
                        workspace_root=root,
                        api_port=free_port(),
                        jwt_secret=JWT_SECRET,
                    )
                    async with serve_api(settings) as url, async_playwright() as pw:
                        context = await pw.chromium.launch_persistent_context(
                            str(root / "profile"),
                            executable_path=CHROMIUM,
                            headless=True,
                            args=CHROMIUM_ARGS,
                        )
                        page = context.pages[0]
                        await page.goto(console_link(settings, url))
                        await page.wait_for_selector("#who-name")
                        report = await measure(page, f"{url}/console/runs/{run_id}", events)
                        await context.close()
                finally:
                    await store.close()
        finally:
            await temporal.stop()
    print_report(events, report)


async def measure(page: Any, url: str, events: int) -> dict[str, float]:
    await page.add_init_script(FRAME_WATCH)
    started = time.perf_counter()
    await page.goto(url)
    # Polled from here: the console's CSP forbids the string evaluation wait_for_function uses.
    count = "document.querySelector('ol.timeline')?.dataset.count"
    deadline = time.perf_counter() + 120
    while await page.evaluate(count) != str(events):
        if time.perf_counter() > deadline:
            raise BenchError(f"The timeline never showed {events} events.")
        await asyncio.sleep(0.01)
    loaded_ms = (time.perf_counter() - started) * 1000
    gaps: list[float] = await page.evaluate("window.__gaps")
    button = page.locator("button.expand").last
    await button.scroll_into_view_if_needed()
    clicked = time.perf_counter()
    await button.click()
    await page.locator("pre.output.full").last.wait_for(state="visible")
    expand_ms = (time.perf_counter() - clicked) * 1000
    nodes: int = await page.evaluate("document.getElementsByTagName('*').length")
    return {
        "loaded_ms": loaded_ms,
        "longest_frame_ms": max(gaps) if gaps else 0.0,
        "frames": float(len(gaps)),
        "expand_ms": expand_ms,
        "dom_nodes": float(nodes),
    }


def print_report(events: int, r: dict[str, float]) -> None:
    print(f"run of {events} events, opened in the console (headless Chromium):")
    print(f"  all events on the page       {r['loaded_ms']:8.0f} ms")
    print(
        f"  longest frame while filling  {r['longest_frame_ms']:8.0f} ms ({r['frames']:.0f} frames)"
    )
    print(f"  show full output, click->shown {r['expand_ms']:6.0f} ms")
    print(f"  DOM elements                 {r['dom_nodes']:8.0f}")


if __name__ == "__main__":
    main()
