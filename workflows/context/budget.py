"""Keeping a request inside the model's window: estimate, cap, prune, decide to compact.

Pure functions over the stored conversation, so the LLM activity that applies them
and a test that checks them see the same thing. In order:

1. A summary from an earlier compaction replaces what it covers: the request is the
   system prompt and the run's input, the summary, then what came after it.
2. Caps: one tool output never takes more than `OUTPUT_SHARE` of the usable window;
   the model sees its beginning and how to page for the rest. The stored output is
   whole.
3. Pruning: tool outputs beyond the most recent `RECENT_SHARE` of the window go as a
   one-line stub naming the call. The boundary moves in coarse jumps (everything
   before the newest step at once), so between jumps each request repeats the last
   one's prefix, which providers serve from their prompt cache.
4. If the calibrated estimate still exceeds `COMPACT_AT` of the usable window, the
   conversation needs compacting; also once what pruning cannot shrink and a
   summary would drop (stubs and the model's tool calls since the last summary)
   passes `STALE_AT` of it, since every later call would pay for them again.
   Harder levels (after a provider refused a request as too long) prune everything
   but the newest step, then everything.

Token estimates are 4 characters a token of the text plus 4 tokens a message,
multiplied by the run's calibration: the provider's reported prompt tokens over
Keel's estimate for its latest call.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "COMPACT_AT",
    "MAX_LEVEL",
    "OUTPUT_SHARE",
    "RECENT_SHARE",
    "ContextItem",
    "ContextPlan",
    "Summary",
    "cap_output",
    "estimate_message",
    "estimate_tools",
    "plan_context",
    "prune_boundary",
]

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
OUTPUT_SHARE = 0.25
RECENT_SHARE = 0.1
COMPACT_AT = 0.75
# Stubs and the model's tool calls since the last summary: once they take this share of
# the window, a summary costs less than carrying them on every later call.
STALE_AT = 0.08
# Level 0: caps and pruning; 1: only the newest step's outputs in full; 2: none.
MAX_LEVEL = 2
# Calibration never moves an estimate further than this factor either way.
MAX_CALIBRATION = 4.0
# Names the steps it stands for: the model learns how far the run got, and a scripted
# model that counts turns (keel.worker.scripted.llm) keeps counting.
SUMMARY_HEADING = "[Summary of steps 1-{through} of this run, written when it was compacted]"

_NUMBERED = re.compile(r"^\s*(\d+)\t")


@dataclass(frozen=True)
class ContextItem:
    """One stored message, with what budgeting needs to know of it."""

    step: int
    message: dict[str, Any]
    tool: str | None = None
    """For a tool result: the name of the call it answers."""
    arguments: str = ""
    """For a tool result: the call's arguments (JSON text)."""


@dataclass(frozen=True)
class Summary:
    """A stored compaction: the summary text and the last step it covers."""

    through_step: int
    content: str


@dataclass
class ContextPlan:
    """The request to send and what budgeting did to get it."""

    messages: list[dict[str, Any]]
    estimate: int
    """Calibrated: what the provider will likely count."""
    raw: int = 0
    """Keel's own count, before calibration."""
    capped: int = 0
    pruned: int = 0
    needs_compaction: bool = False
    boundary: int = 0
    """Tool outputs of steps before this one went as stubs."""
    stale: int = 0
    """Tokens of stubs and tool calls since the summary: what pruning cannot shrink."""
    notes: list[str] = field(default_factory=list)


def estimate_text(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_message(message: dict[str, Any]) -> int:
    """Keel's estimate of one message: its text and tool calls, plus a message's overhead."""
    tokens = MESSAGE_OVERHEAD_TOKENS + estimate_text(str(message.get("content") or ""))
    calls = message.get("tool_calls")
    if calls:
        tokens += estimate_text(json.dumps(calls, separators=(",", ":")))
    return tokens


def estimate_tools(tools: list[dict[str, Any]]) -> int:
    """Keel's estimate of a request's tool schemas."""
    return estimate_text(json.dumps(tools, separators=(",", ":"))) if tools else 0


def calibrated(raw: int, calibration: float) -> int:
    factor = min(MAX_CALIBRATION, max(1 / MAX_CALIBRATION, calibration))
    return math.ceil(raw * factor)


def cap_output(tool: str | None, arguments: str, content: str, limit_tokens: int) -> str:
    """`content` cut to about `limit_tokens`, ending with how to get the rest."""
    if estimate_text(content) <= limit_tokens:
        return content
    budget = max(1, limit_tokens * CHARS_PER_TOKEN)
    cut = content[:budget]
    if "\n" in cut:
        cut = cut[: cut.rindex("\n")]
    total = estimate_text(content)
    note = f"[Keel: output cut to about {limit_tokens} of {total} tokens to fit the context window"
    if tool == "read_file":
        last = _last_numbered_line(cut)
        path = _argument(arguments, "path")
        if last is not None:
            note += f"; call read_file with path={path} start_line={last + 1} to read on"
    elif tool == "search_code":
        note += "; search again with a narrower pattern, path or glob, or lower max_results"
    else:
        note += "; ask for a narrower result"
    return f"{cut}\n{note}]"


def stub(tool: str | None, arguments: str, tokens: int) -> str:
    """The one line a pruned tool output is sent as."""
    return f"[pruned: {tool or 'tool'} {arguments}, {tokens} tokens; call it again to see it]"


def prune_boundary(outputs_by_step: list[tuple[int, int]], recent_tokens: int) -> int:
    """The first step whose tool outputs are still sent in full.

    `outputs_by_step` holds (step, tokens of its tool outputs) in step order. Walking
    forward, once the outputs sent in full exceed `recent_tokens`, the boundary jumps
    to the newest step: a coarse step, so the prefix stays put until the next jump.
    """
    boundary = 0
    full = 0
    for step, tokens in outputs_by_step:
        full += tokens
        if full > recent_tokens and step > boundary:
            boundary = step
            full = tokens
    return boundary


def plan_context(
    items: list[ContextItem],
    *,
    usable: int,
    tools_tokens: int,
    summary: Summary | None = None,
    calibration: float = 1.0,
    level: int = 0,
) -> ContextPlan:
    """The request to send for `items` within `usable` tokens, and whether to compact."""
    kept = _after_summary(items, summary)
    cap_tokens = max(64, int(usable * OUTPUT_SHARE))
    capped = 0
    sized: list[tuple[ContextItem, str, int]] = []
    for item in kept:
        content = str(item.message.get("content") or "")
        if item.message.get("role") == "tool":
            cut = cap_output(item.tool, item.arguments, content, cap_tokens)
            if cut is not content:
                capped += 1
            content = cut
        sized.append((item, content, estimate_text(content)))
    tool_steps: dict[int, int] = {}
    for item, _, tokens in sized:
        if item.message.get("role") == "tool":
            tool_steps[item.step] = tool_steps.get(item.step, 0) + tokens
    steps = sorted(tool_steps)
    if level == 0:
        boundary = prune_boundary([(s, tool_steps[s]) for s in steps], int(usable * RECENT_SHARE))
    elif level == 1:
        boundary = steps[-1] if steps else 0
    else:
        boundary = (steps[-1] + 1) if steps else 0
    messages: list[dict[str, Any]] = []
    pruned = 0
    stale = 0
    for item, content, tokens in sized:
        message = dict(item.message)
        if message.get("role") == "tool" and item.step < boundary:
            content = stub(item.tool, item.arguments, tokens)
            pruned += 1
        message["content"] = content
        messages.append(message)
        role = message.get("role")
        if item.step > 0 and role == "tool" and item.step < boundary:
            stale += estimate_message(message)
        elif item.step > 0 and role == "assistant" and message.get("tool_calls"):
            # The calls, not the text: what the model wrote a summary would keep anyway.
            stale += estimate_message({"tool_calls": message["tool_calls"]})
    raw = tools_tokens + sum(estimate_message(m) for m in messages)
    estimate = calibrated(raw, calibration)
    return ContextPlan(
        messages=messages,
        estimate=estimate,
        raw=raw,
        capped=capped,
        pruned=pruned,
        needs_compaction=estimate > usable * COMPACT_AT or stale > usable * STALE_AT,
        stale=stale,
        boundary=boundary,
    )


def summary_message(summary: Summary) -> dict[str, Any]:
    heading = SUMMARY_HEADING.format(through=summary.through_step)
    return {"role": "user", "content": f"{heading}\n\n{summary.content}"}


def _after_summary(items: list[ContextItem], summary: Summary | None) -> list[ContextItem]:
    """System prompt and input, the summary, then what came after it."""
    if summary is None:
        return items
    head = [i for i in items if i.step == 0]
    tail = [i for i in items if i.step > summary.through_step]
    return [*head, ContextItem(step=summary.through_step, message=summary_message(summary)), *tail]


def _last_numbered_line(text: str) -> int | None:
    for line in reversed(text.splitlines()):
        match = _NUMBERED.match(line)
        if match:
            return int(match[1])
    return None


def _argument(arguments: str, name: str) -> str:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return "?"
    value = parsed.get(name) if isinstance(parsed, dict) else None
    return str(value) if value is not None else "?"
