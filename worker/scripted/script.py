"""What the scripted model answers: its turns, the conversations they belong to, and a
script as YAML loads it (`keel.worker.scripted.llm` serves it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, Self

import yaml
from pydantic import BaseModel, Field, model_validator

from keel.worker.scripted.provider_play import RateLimit
from keel.worker.scripted.request_reading import first_user, text_of

__all__ = ["Conversation", "Script", "ScriptedToolCall", "Turn"]


class ScriptedToolCall(BaseModel):
    """One tool call the scripted model makes."""

    name: str
    """Name of the tool to call."""
    arguments: dict[str, object] | str = Field(default_factory=dict)
    """Arguments; a dict is sent as JSON, a str is sent verbatim (it may be malformed)."""

    def arguments_json(self) -> str:
        """The arguments as they appear on the wire."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


class Turn(BaseModel):
    """One scripted assistant reply."""

    content: str | None = None
    """Text of the reply; `{files_read}` and `{tool_results}` are filled in from the request."""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    """Tool calls of the reply, in order."""
    delay_s: float = Field(default=0.0, ge=0.0)
    """Seconds to wait before answering."""
    stream_pause_s: float = Field(default=0.0, ge=0.0)
    """Seconds between streamed chunks, so a watcher sees the answer arrive piece by piece."""
    prompt_tokens: int = Field(default=100, ge=0)
    """Reported prompt token usage."""
    completion_tokens: int = Field(default=20, ge=0)
    """Reported completion token usage."""
    fail_status: int | None = Field(default=None, ge=400, le=599)
    """HTTP status of the failures this turn answers first, e.g. 429 or 503."""
    fail_times: int = Field(default=0, ge=0)
    """How many requests for this turn fail with `fail_status` before it is answered."""
    retry_after_s: float | None = Field(default=None, ge=0.0)
    """Seconds sent in the failures' `Retry-After` header; none when unset."""

    @model_validator(mode="after")
    def _has_content_or_tool_calls(self) -> Self:
        if self.content is None and not self.tool_calls:
            raise ValueError("A turn needs `content`, `tool_calls` or both.")
        return self

    @model_validator(mode="after")
    def _failures_have_a_status(self) -> Self:
        if self.fail_status is None and (self.fail_times > 0 or self.retry_after_s is not None):
            raise ValueError(
                "`fail_times` and `retry_after_s` need `fail_status`, the HTTP status to fail with."
            )
        return self


class Conversation(BaseModel):
    """Turns for the conversations whose first user message contains `match`.

    One server then plays several agents at once, e.g. a parent and the sub-agents
    it starts, each of which begins with the prompt its parent wrote."""

    match: str = Field(min_length=1)
    """Text the conversation's first user message contains."""
    turns: list[Turn]
    """Turn `i` answers requests of this conversation that carry `i` assistant messages."""


class Script(BaseModel):
    """The turns the scripted model plays, in order."""

    turns: list[Turn] = Field(default_factory=list)
    """Turn `i` answers requests that carry `i` assistant messages."""
    name: str = "scripted"
    """Model name listed by `/v1/models` and used when a request names none."""
    context_window: int | None = Field(default=None, ge=1)
    """Refuse requests larger than this many tokens, as OpenAI does; none: no limit."""
    policy: Literal["reviewer", "plain_reviewer"] | None = None
    """Decide each reply from the request instead of playing `turns`; `plain_reviewer`
    never calls `task` and writes no coverage sections in its report."""

    conversations: list[Conversation] = Field(default_factory=list)
    """Other conversations' turns; the first that matches a request plays, else `turns`."""
    summaries: Literal["reviewer", "fail", "empty"] = "reviewer"
    """How a request to summarise is answered: the reviewer's summary, HTTP 503, or no text."""
    rate_limit: RateLimit | None = None
    """Answer 429 past this many requests a window (`provider_play`); none: no limit."""
    model_failures: dict[str, int] = Field(default_factory=dict)
    """Model name → the HTTP status every request naming it gets (529, 404…)."""

    def turns_for(self, messages: list[object]) -> tuple[str, list[Turn]]:
        """The conversation a request belongs to (its `match`, "" for the main one) and turns."""
        text = text_of(first_user(messages))
        for conversation in self.conversations:
            if conversation.match in text:
                return conversation.match, conversation.turns
        return "", self.turns

    @model_validator(mode="after")
    def _has_turns_or_policy(self) -> Self:
        if not self.turns and self.policy is None:
            raise ValueError("A script needs `turns` or a `policy`.")
        return self

    @classmethod
    def load(cls, path: Path) -> Script:
        """Read a script from a `.json` file, or from YAML for any other suffix."""
        path = Path(path)
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
        if not isinstance(data, dict):
            raise ValueError(
                f"Script file {path} must hold a mapping with a `turns` list; "
                f"found {type(data).__name__}."
            )
        return cls.model_validate(data)
