"""Following a run in the terminal: a live line of progress, tool calls as they happen."""

from __future__ import annotations

import asyncio

from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from api.client import KeelClient
from api.schemas import EventPublic, RunPublic

TERMINAL_EVENTS = {"done", "error", "cancelled"}
POLL_INTERVAL_S = 0.25


def describe_event(event: EventPublic) -> str | None:
    data = event.data
    if event.type == "tool_call":
        return f"  → {data.get('name')} {data.get('arguments', '')}"
    if event.type == "tool_result":
        if data.get("cached"):
            return f"  ← {data.get('name')}: repeated call, earlier answer reused"
        if data.get("is_error"):
            return f"  ✗ {data.get('name')}: {str(data.get('preview', ''))[:120]}"
        return f"  ← {data.get('name')}: {data.get('size', 0)} bytes"
    if event.type == "error":
        return f"  run failed: {data.get('error')}"
    return None


async def follow_run(client: KeelClient, run_id: str, console: Console) -> RunPublic:
    """Show progress until the run's terminal event, then return the run."""
    after = 0
    steps = tool_calls = tokens = 0
    spinner = Spinner("dots", text="starting")
    with Live(spinner, console=console, refresh_per_second=8, transient=True):
        finished = False
        while not finished:
            page = await client.events(run_id, after)
            for event in page.events:
                data = event.data
                if event.type == "usage":
                    steps = int(str(data.get("step", steps)))
                    tokens += int(str(data.get("prompt_tokens", 0))) + int(
                        str(data.get("completion_tokens", 0))
                    )
                if event.type == "tool_call":
                    tool_calls += 1
                line = describe_event(event)
                if line:
                    console.print(Text(line), highlight=False)
                finished = finished or event.type in TERMINAL_EVENTS
            after = page.next_after
            spinner.update(text=f"step {steps} · {tool_calls} tool calls · {tokens} tokens")
            if not finished:
                await asyncio.sleep(POLL_INTERVAL_S)
    return await client.get_run(run_id)
