"""Plugins as the workflow sees them: names, risks and hooks, never their code.

A worker loads installed plugins (`worker.plugins`); the agent catalog puts a small
reference to each plugin tool an agent lists, and to each installed hook, into the
agent's spec, so the run's history carries what the gate needs and no more. The
tool's description and full JSON schema stay in the worker, which offers them to the
model and checks the arguments again before the plugin's code runs.

Pure code: the gate turns a reference into a `ToolSpec`; permission rules match the
tool's own name, the group `plugin`, and `plugin:<plugin>:<tool>` as a glob.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from keel.workflows.gate.tool_specs import Risk, ToolArgs, ToolSpec

HookEvent = Literal["tool.before", "tool.after", "run.end"]
JsonType = Literal["string", "integer", "number", "boolean", "array", "object", "null", "any"]


class PluginToolArgs(ToolArgs):
    """Arguments of a plugin tool: any JSON object here; the worker checks its schema."""

    model_config = ConfigDict(extra="allow")


class PluginToolRef(BaseModel):
    """What the gate knows of one plugin tool: enough to judge a call without its code."""

    name: str = Field(description="The name the model calls it by.")
    plugin: str = Field(description="The plugin that provides it.")
    risk: Risk
    read_only: bool = Field(description="Calls of one step may run in parallel; no claim.")
    properties: dict[str, JsonType] = Field(
        default_factory=dict, description="Top-level arguments and their JSON types."
    )
    required: list[str] = Field(default_factory=list)
    closed: bool = Field(default=True, description="Arguments not listed are refused.")
    subject_arg: str | None = Field(
        default=None, description="The argument rules match; none: the arguments as JSON."
    )
    secret_prompt: str | None = Field(
        default=None, description="Each call asks the run's user for a secret with this first."
    )

    @property
    def permission(self) -> str:
        return f"plugin:{self.plugin}:{self.name}"


class HookRef(BaseModel):
    """One installed hook, in the fixed order hooks run: by plugin name, then hook name."""

    plugin: str
    name: str
    event: HookEvent
    tools: str = Field(default="*", description="Glob over the tool names it applies to.")

    @property
    def key(self) -> str:
        return f"{self.plugin}/{self.name}"

    def applies_to(self, tool: str) -> bool:
        return fnmatchcase(tool, self.tools)


def hooks_for(hooks: list[HookRef], event: HookEvent, tool: str | None = None) -> list[HookRef]:
    """The hooks of `event` (for `tool`), in their fixed order."""
    return [h for h in hooks if h.event == event and (tool is None or h.applies_to(tool))]


# What the workflow marks a call with when the hooks that had to judge it failed.
FAILED_HOOKS = "failed"


def hook_denial(hook: str) -> str:
    """The audit's `rule` of a call a `tool.before` hook refused, as a rule's text is."""
    return "tool.before hooks failed" if hook == FAILED_HOOKS else f"hook {hook}"


def _subject(ref: PluginToolRef) -> Callable[[ToolArgs], str]:
    def subject_of(args: ToolArgs) -> str:
        values = args.model_dump()
        if ref.subject_arg is not None:
            value = values.get(ref.subject_arg, "")
            return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        return json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    return subject_of


def plugin_tool_spec(ref: PluginToolRef) -> ToolSpec:
    """The spec the gate and the permission rules use for a plugin tool."""
    return ToolSpec(
        name=ref.name,
        description=f"Tool {ref.name} of the plugin {ref.plugin}.",
        risk=ref.risk,
        group="plugin",
        read_only=ref.read_only,
        args_model=PluginToolArgs,
        subject_of=_subject(ref),
        permission=ref.permission,
    )


_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def argument_problems(ref: PluginToolRef, arguments: dict[str, object]) -> list[str]:
    """What the model must fix in `arguments`, by the tool's top-level schema.

    A first check inside the workflow, so a call with missing or unknown arguments is
    answered before anyone is asked to approve it; the worker checks the whole schema.
    """
    problems = [f"{name}: Field required" for name in ref.required if name not in arguments]
    for name, value in arguments.items():
        expected = ref.properties.get(name)
        if expected is None:
            if ref.closed:
                problems.append(f"{name}: Extra inputs are not permitted")
            continue
        if expected == "any":
            continue
        bad_bool = isinstance(value, bool) and expected in ("integer", "number")
        if bad_bool or not isinstance(value, _PYTHON_TYPES[expected]):
            problems.append(f"{name}: should be of type {expected}")
    return problems


@dataclass(frozen=True)
class PluginToolset:
    """The plugin tools one run may call: those its agent lists."""

    tools: tuple[PluginToolRef, ...] = ()

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    def ref(self, name: str) -> PluginToolRef | None:
        return next((t for t in self.tools if t.name == name), None)

    def spec(self, name: str) -> ToolSpec | None:
        ref = self.ref(name)
        return plugin_tool_spec(ref) if ref is not None else None
