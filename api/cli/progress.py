"""Following a run in the terminal: a live line of progress, tool calls as they happen,
and, when the run asks, a prompt to decide."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from rich.console import Console
from rich.live import Live
from rich.prompt import Prompt
from rich.spinner import Spinner
from rich.text import Text

from keel.api.cli.client import KeelApiError, KeelClient
from keel.api.core.schemas.events import EventPublic
from keel.api.core.schemas.interactions import InteractionDecisionCreate, InteractionPublic
from keel.api.core.schemas.runs import RunPublic
from keel.api.core.schemas.usage import UsagePublic

TERMINAL_EVENTS = {"done", "error", "cancelled"}
POLL_INTERVAL_S = 0.25
# With sub-agents, the tree's usage is read about once a second.
TREE_USAGE_EVERY = 4

Decider = Callable[[InteractionPublic], InteractionDecisionCreate | None]


def _compact(arguments: object) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return str(arguments)
    if isinstance(arguments, dict):
        arguments = {k: v for k, v in arguments.items() if v is not None}
    text = json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= 160 else text[:157] + "..."


def usage_text(own_tokens: int, tree: UsagePublic | None, own_cost: float = 0.0) -> str:
    """Tokens (and cost, when priced) as a person should read them: the whole tree's,
    with this run's own beside it when sub-agents spent some too."""
    if tree is None or tree.runs <= 1:
        cost = f" · ${own_cost:.4f}" if own_cost else ""
        return f"{own_tokens:,} tokens{cost}"
    cost = f" · ${tree.cost_usd:.4f}" if tree.cost_usd else ""
    subs = tree.runs - 1
    return (
        f"{tree.total_tokens:,} tokens{cost} with {subs} sub-agent run{'s' if subs > 1 else ''}"
        f" ({own_tokens:,} this run)"
    )


def describe_event(event: EventPublic) -> str | None:
    data = event.data
    if event.type == "tool_call":
        return f"  → {data.get('name')} {_compact(data.get('arguments', ''))}"
    if event.type == "tool_result":
        if data.get("cached"):
            return f"  ← {data.get('name')}: repeated call, earlier answer reused"
        if data.get("is_error"):
            return f"  ✗ {data.get('name')}: {str(data.get('preview', ''))[:120]}"
        return f"  ← {data.get('name')}: {data.get('size', 0)} bytes"
    if event.type == "interaction_resolved":
        if data.get("status") == "cancelled":
            return f"  ✗ {data.get('interaction_id')} cancelled: the run ended before a decision"
        who = data.get("decided_by") or "the timer"
        return f"  ✓ {data.get('interaction_id')} {data.get('status')} by {who}"
    if event.type == "error":
        return f"  run failed: {data.get('error')}"
    return None


class EventLines:
    """The lines for a run's events, in the order a reader expects them.

    A client-executed call's answer (`✓ … answered`) is recorded before the call's
    `tool_call` event, since the answer is what the call returns; it is held until
    the line of the call it answers has been printed.
    """

    def __init__(self) -> None:
        self._held: dict[str, list[str]] = {}

    def lines(self, event: EventPublic) -> list[str]:
        line = describe_event(event)
        data = event.data
        if (
            line
            and event.type == "interaction_resolved"
            and data.get("kind") == "local_tool_result"
        ):
            self._held.setdefault(str(data.get("tool")), []).append(line)
            return []
        out = [line] if line else []
        if event.type == "tool_call":
            held = self._held.get(str(data.get("name")))
            if held:
                out.append(held.pop(0))
        if event.type in TERMINAL_EVENTS:
            # Nothing else will print them; better late than lost.
            out = [h for lines in self._held.values() for h in lines] + out
            self._held.clear()
        return out


def terminal_decider(console: Console) -> Decider:
    """Ask the person at the terminal; Enter leaves the decision to someone else."""

    def decide(ia: InteractionPublic) -> InteractionDecisionCreate | None:
        if ia.kind == "ask_user":
            console.print(f"\n[bold]The agent asks:[/bold] {ia.question}")
            answer = Prompt.ask("Your answer (empty: decide later)", default="", console=console)
            if not answer.strip():
                return None
            return InteractionDecisionCreate(decision="answer", text=answer)
        console.print(
            f"\n[bold]Approval needed[/bold] ({ia.risk}): {ia.tool} {_compact(ia.arguments)}"
        )
        console.print(f"  expires {ia.expires_at:%Y-%m-%d %H:%M %Z} · id {ia.id}")
        choice = Prompt.ask(
            "[a]pprove once, approve [A]lways this session, [r]eject, or Enter to decide later",
            choices=["a", "A", "r", ""],
            default="",
            show_choices=False,
            console=console,
        )
        if choice == "a":
            return InteractionDecisionCreate(decision="approve", payload_hash=ia.payload_hash)
        if choice == "A":
            return InteractionDecisionCreate(
                decision="approve_always", payload_hash=ia.payload_hash
            )
        if choice == "r":
            reason = Prompt.ask("Reason (optional)", default="", console=console)
            return InteractionDecisionCreate(decision="reject", text=reason or None)
        return None

    return decide


async def _ask(
    client: KeelClient,
    run_id: str,
    interaction_id: str,
    decider: Decider | None,
    console: Console,
) -> None:
    if decider is None:
        console.print(
            f"  … waiting on {interaction_id}: decide with "
            f"`keel approve {run_id} {interaction_id}` or `keel reject {run_id} {interaction_id}`"
        )
        return
    ia = await client.interaction(run_id, interaction_id)
    decision = await asyncio.to_thread(decider, ia)
    if decision is None:
        console.print(f"  … left {interaction_id} for later (`keel approve {run_id} {ia.id}`)")
        return
    try:
        await client.decide(run_id, interaction_id, decision)
    except KeelApiError as exc:
        console.print(f"  [red]decision not taken:[/red] {exc}")


async def follow_run(
    client: KeelClient, run_id: str, console: Console, decider: Decider | None = None
) -> RunPublic:
    """Show progress until the run's terminal event, then return the run."""
    after = 0
    steps = tool_calls = tokens = polls = 0
    tree: UsagePublic | None = None
    delegated = False
    shown = EventLines()
    spinner = Spinner("dots", text="starting")
    live = Live(spinner, console=console, refresh_per_second=8, transient=True)
    live.start()
    try:
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
                delegated = delegated or event.type == "child_run"
                for line in shown.lines(event):
                    console.print(Text(line), highlight=False)
                if event.type == "interaction_pending":
                    live.stop()
                    await _ask(client, run_id, str(data["interaction_id"]), decider, console)
                    live.start()
                finished = finished or event.type in TERMINAL_EVENTS
            after = page.next_after
            polls += 1
            if delegated and polls % TREE_USAGE_EVERY == 0:
                # Sub-agents spend too: the tree's figure is what the run costs.
                tree = (await client.get_run(run_id)).total_usage
            spinner.update(
                text=f"step {steps} · {tool_calls} tool calls · {usage_text(tokens, tree)}"
            )
            if not finished:
                await asyncio.sleep(POLL_INTERVAL_S)
    finally:
        live.stop()
    return await client.get_run(run_id)
