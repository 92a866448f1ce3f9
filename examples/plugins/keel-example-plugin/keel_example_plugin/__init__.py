"""An example Keel plugin: what docs/plugins.md walks through, and what the tests install.

- `word_count` (read): counts the lines, words and characters of a workspace file.
- `append_note` (write): appends a line to a notes file; a write, so it asks first.
- `tool.before` `no_env_files`: refuses any call whose subject names a `.env` file.
- `tool.after` `redact_api_keys`: replaces what looks like an API key in any output.
- `run.end` `notify`: appends a line to `$KEEL_EXAMPLE_NOTIFY_FILE`, when it is set.
- the `notes` agent, which uses both tools.
- the `counter` model provider, for models named `example/…`: no network and no weights,
  it works its answer out itself. Asked about files, it calls `word_count` on each (when
  the agent offers the tool), then answers with what the tool said, streamed word by
  word; it counts tokens as words.
"""

from __future__ import annotations

import json
import os
import re
from importlib.resources import files
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from keel.worker.plugins import (
    AfterDecision,
    BeforeDecision,
    ModelReply,
    ModelRequest,
    ModelToolCall,
    Plugin,
    PluginHook,
    PluginProvider,
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


FILE_NAME = re.compile(r"[\w./-]+\.[A-Za-z0-9]+")


def count_words(request: ModelRequest) -> ModelReply:
    """The `counter` model: measure the files the user names, then report."""
    messages = request.messages
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    asked = _text(messages[last_user]) if last_user >= 0 else ""
    results = [_text(m) for m in messages[last_user + 1 :] if m.get("role") == "tool"]
    offered = {t.get("function", {}).get("name") for t in request.tools}
    files = list(dict.fromkeys(FILE_NAME.findall(asked)))
    tokens_in = sum(len(_text(m).split()) for m in messages)
    if not results and files and "word_count" in offered:
        calls = [
            ModelToolCall(id=f"count_{i}", name="word_count", arguments={"path": path})
            for i, path in enumerate(files)
        ]
        return ModelReply(tool_calls=calls, input_tokens=tokens_in, output_tokens=2 * len(calls))
    if results:
        text = "Counted: " + "; ".join(r.strip() for r in results)
    elif files:
        text = f"I cannot count {', '.join(files)} here: no word_count tool was offered."
    else:
        text = "Name a file (e.g. README.md) and I will count its words."
    for word in text.split(" "):
        request.stream(word + " ")
    return ModelReply(text=text, input_tokens=tokens_in, output_tokens=len(text.split()))


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


plugin = Plugin(
    manifest={
        "name": "example",
        "version": "0.1.0",
        "kinds": ["tool", "hook", "agents", "provider"],
        "platforms": ["any"],
        "description": (
            "Counts words, keeps notes, keeps .env files and API keys away; a model that counts."
        ),
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
    providers=[
        PluginProvider(
            name="counter",
            models=["example/*"],
            complete=count_words,
            description="Counts the words of the files it is asked about, with word_count.",
        )
    ],
)
