"""What a plugin's code is given and must give back: tools, hooks and their views.

Plugin authors import these from `worker.plugins`; they live here because the
activities that call plugin code may not import `worker/`. A function may be plain or
`async`; a plain one runs in a thread, so it may block.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from pydantic import BaseModel

from keel.activities.tools.workspace import Workspace
from keel.workflows.gate.plugin_refs import HookEvent
from keel.workflows.gate.tool_specs import Risk

if TYPE_CHECKING:
    from keel.activities.llm.provider_api import ProviderRef

__all__ = [
    "AfterDecision",
    "BeforeDecision",
    "PluginCode",
    "PluginHook",
    "PluginTool",
    "RunEndView",
    "ToolCallView",
    "ToolContext",
    "ToolOutputView",
    "call_plugin",
]

T = TypeVar("T")


@dataclass(frozen=True)
class ToolContext:
    """What a plugin tool gets besides its arguments."""

    run_id: str
    tenant_id: str
    workspace: Workspace
    """The run's workspace: `workspace.resolve(path)` refuses paths that lead out of it."""
    secret: str | None = field(default=None, repr=False)
    """What the user gave when the tool asks for a secret (`secret_prompt`), else None."""

    @property
    def root(self) -> Path:
        return self.workspace.root


@dataclass(frozen=True)
class PluginTool:
    """A tool a plugin provides: offered to agents that list it, run as an activity.

    `run(args, context)` gets the arguments validated by `args_model` and answers with
    the text the model reads; an exception is told to the model as the call's error.
    """

    name: str
    description: str
    args_model: type[BaseModel]
    risk: Risk
    run: Callable[[Any, ToolContext], str | Awaitable[str]]
    subject_arg: str | None = None
    """The argument permission patterns match (a path, a URL); None: the arguments as JSON."""
    secret_prompt: str | None = None
    """Set: each call first asks the run's user for a secret (a `secret_ref` interaction,
    this its question); the tool gets it as `context.secret`, the model never sees it."""

    @property
    def read_only(self) -> bool:
        return self.risk == "read"


@dataclass(frozen=True)
class ToolCallView:
    """A tool call as a hook sees it."""

    run_id: str
    tenant_id: str
    agent: str
    tool: str
    arguments: dict[str, Any]
    subject: str
    risk: Risk


@dataclass(frozen=True)
class ToolOutputView:
    """What a tool answered, as a `tool.after` hook sees it."""

    text: str
    is_error: bool


@dataclass(frozen=True)
class RunEndView:
    """How a run ended, as a `run.end` hook sees it."""

    run_id: str
    tenant_id: str
    agent: str
    status: str
    stop_reason: str
    error: str | None = None


@dataclass(frozen=True)
class BeforeDecision:
    """A `tool.before` hook's answer; returning None is `allow`."""

    action: Literal["allow", "deny", "ask"] = "allow"
    reason: str = ""
    """For `deny`: what the model is told."""


@dataclass(frozen=True)
class AfterDecision:
    """A `tool.after` hook's answer; returning None leaves the output as it is."""

    text: str | None = None
    """The output the model sees instead (a redacted copy); None keeps it."""
    note: str | None = None
    """A line added under the output (an annotation)."""
    changes: list[str] = field(default_factory=list)
    """What was changed, for the audit log (never the secret itself)."""


@dataclass(frozen=True)
class PluginHook:
    """A hook a plugin provides, for one event, on the tools whose names match `tools`.

    `tool.before`: `run(call) -> BeforeDecision | None`; `tool.after`:
    `run(call, output) -> AfterDecision | None`; `run.end`: `run(end) -> None`.
    """

    name: str
    event: HookEvent
    run: Callable[..., Any]
    tools: str = "*"


class PluginCode(Protocol):
    """The loaded plugins' code, as the activities reach it (`worker.plugins.PluginRegistry`)."""

    def tool(self, name: str) -> PluginTool | None: ...

    def hook(self, key: str) -> PluginHook | None: ...

    def provider_for(self, model: str) -> ProviderRef | None:
        """The provider plugin that claims `model`, if one does."""
        ...


async def call_plugin(function: Callable[..., Any], *args: Any) -> Any:
    """Call a plugin's function: awaited if async, in a thread if not (it may block)."""
    if inspect.iscoroutinefunction(function):
        return await function(*args)
    result = await asyncio.to_thread(function, *args)
    if inspect.isawaitable(result):
        return await result
    return result
