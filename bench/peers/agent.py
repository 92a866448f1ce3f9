"""The agent every implementation runs: count up with `bump`, then answer.

Only constants and plain data live here, so workflow modules can import it
without pulling anything heavy into Temporal's sandbox.
"""

from __future__ import annotations

MODEL = "scripted"
API_KEY = "bench-key"
PROMPT = "Count up from 0 with bump, one call at a time, then say how many calls you made."
INSTRUCTIONS = "Call bump with the previous result until you are told to stop, then answer."
TOOL_NAME = "bump"
TOOL_DESCRIPTION = "Return n + 1."
ANSWER = "Done after {tool_results} tool results."
"""The scripted final answer; the scripted server fills in how many tool results it was sent."""
# Keel has no `bump`; its side of the comparison reads one line of this file per step.
KEEL_READ_PATH = "notes.txt"

BUMP_TOOL: dict[str, object] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": TOOL_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
            "additionalProperties": False,
        },
    },
}
"""`bump` as a chat completions tool, for the hand-written loops."""


def bump(n: int) -> int:
    """The tool itself."""
    return n + 1


def expected_answer(steps: int) -> str:
    """The answer of a run that sent every one of its `steps` tool results back to the model."""
    return ANSWER.format(tool_results=steps)


def max_turns(steps: int) -> int:
    """A turn limit for the frameworks that have one, with room above the script."""
    return steps + 5
