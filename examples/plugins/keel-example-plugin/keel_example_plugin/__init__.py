"""An example Keel plugin: what docs/plugins.md walks through, and what the tests install.

- `word_count` (read): counts the lines, words and characters of a workspace file.
- `append_note` (write): appends a line to a notes file; a write, so it asks first.
- `tool.before` `no_env_files`: refuses any call whose subject names a `.env` file.
- `tool.after` `redact_api_keys`: replaces what looks like an API key in any output.
- `run.end` `notify`: appends a line to `$KEEL_EXAMPLE_NOTIFY_FILE`, when it is set.
- the `notes` agent, which uses both tools.
"""

from __future__ import annotations

import json
import os
import re
from importlib.resources import files

from pydantic import BaseModel, ConfigDict, Field

from worker.plugins import (
    AfterDecision,
    BeforeDecision,
    Plugin,
    PluginHook,
    PluginTool,
    RunEndView,
    ToolCallView,
    ToolContext,
    ToolOutputView,
)

API_KEY = re.compile(r"\b(sk|ghp|xoxb)[-_][A-Za-z0-9_-]{8,}")


class WordCountArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path relative to the workspace root.")


def word_count(args: WordCountArgs, context: ToolContext) -> str:
    text = context.workspace.resolve(args.path).read_text(errors="replace")
    lines, words = len(text.splitlines()), len(text.split())
    return f"{args.path}: {lines} lines, {words} words, {len(text)} characters"


class AppendNoteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="Notes file relative to the workspace root.")
    text: str = Field(min_length=1, max_length=2000, description="One line to append.")


def append_note(args: AppendNoteArgs, context: ToolContext) -> str:
    target = context.workspace.resolve(args.path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a") as notes:
        notes.write(args.text.replace("\n", " ") + "\n")
    return f"Appended one line to {args.path}."


def no_env_files(call: ToolCallView) -> BeforeDecision | None:
    if re.search(r"(^|/)\.env(\.|$)", call.subject):
        return BeforeDecision(
            action="deny", reason=".env files hold secrets; they are not for agents to touch"
        )
    return None


def redact_api_keys(call: ToolCallView, output: ToolOutputView) -> AfterDecision | None:
    redacted, count = API_KEY.subn("[redacted]", output.text)
    if not count:
        return None
    return AfterDecision(
        text=redacted,
        note=f"{count} API key(s) were redacted from this output.",
        changes=[f"redacted {count} API key(s)"],
    )


def notify(end: RunEndView) -> None:
    target = os.environ.get("KEEL_EXAMPLE_NOTIFY_FILE")
    if target:
        line = {"run_id": end.run_id, "status": end.status, "stop_reason": end.stop_reason}
        with open(target, "a") as out:
            out.write(json.dumps(line) + "\n")


plugin = Plugin(
    manifest={
        "name": "example",
        "version": "0.1.0",
        "kinds": ["tool", "hook", "agents"],
        "platforms": ["any"],
        "description": "Counts words, keeps notes, keeps .env files and API keys away.",
    },
    tools=[
        PluginTool(
            name="word_count",
            description="Count the lines, words and characters of a file of the workspace.",
            args_model=WordCountArgs,
            risk="read",
            run=word_count,
            subject_arg="path",
        ),
        PluginTool(
            name="append_note",
            description="Append one line of text to a notes file of the workspace.",
            args_model=AppendNoteArgs,
            risk="write",
            run=append_note,
            subject_arg="path",
        ),
    ],
    hooks=[
        PluginHook(name="no_env_files", event="tool.before", run=no_env_files),
        PluginHook(name="redact_api_keys", event="tool.after", run=redact_api_keys),
        PluginHook(name="notify", event="run.end", run=notify),
    ],
    agents=files(__package__) / "agents",
)
