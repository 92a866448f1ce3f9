"""Installed plugins, found through the `keel.plugins` entry-point group and checked.

Each entry point names a `Plugin` (or a function returning one). A plugin is loaded
only when its manifest is valid, it is meant for this platform, what it provides
matches the kinds it declares, and none of its names clash with a built-in or with a
plugin loaded before it (entry points are taken in name order, so the same plugins
always win). Everything else is refused, with the reason, and the process starts
without it: `keel plugins list` shows both.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ValidationError

from keel.activities.llm.provider_api import PluginProvider, ProviderRef
from keel.activities.llm.providers.claims import (
    BUILTIN_CLAIMS,
    claim_problem,
    first_overlap,
    matches,
)
from keel.activities.plugin_api import PluginHook, PluginTool
from keel.worker.plugins.manifest import PluginKind, PluginManifest
from keel.workflows.gate.mcp_tools import MCP_PREFIX
from keel.workflows.gate.plugin_refs import HookEvent, HookRef, JsonType, PluginToolRef
from keel.workflows.gate.tool_specs import TOOL_SPECS, Risk

ENTRY_POINT_GROUP = "keel.plugins"
# OpenAI's and Anthropic's rule for function names.
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
PROVIDER_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
_JSON_TYPES = set(get_args(JsonType))


@dataclass(frozen=True)
class Plugin:
    """What a plugin package exposes through its entry point."""

    manifest: Mapping[str, object]
    """Checked by Keel (`PluginManifest`): name, version, kinds, platforms."""
    tools: Sequence[PluginTool] = ()
    hooks: Sequence[PluginHook] = ()
    agents: Path | Traversable | None = None
    """A directory of agent definition files (`*.md`), e.g. `files(__package__) / "agents"`."""
    providers: Sequence[PluginProvider] = ()
    """Model adapters, each for the model names it claims."""


@dataclass(frozen=True)
class PluginReport:
    """One entry point: loaded, or refused and why."""

    entry_point: str
    source: str
    status: Literal["loaded", "refused"]
    name: str = ""
    version: str = ""
    kinds: tuple[str, ...] = ()
    reason: str = ""
    tools: tuple[str, ...] = ()
    hooks: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    """Each as `name (claim, claim)`."""


class PluginRefused(Exception):
    """Why a plugin is not loaded; the message names the plugin's field."""


@dataclass
class _Loaded:
    manifest: PluginManifest
    plugin: Plugin
    entry_point: str
    source: str
    agent_names: list[str] = field(default_factory=list)


class PluginRegistry:
    """The loaded plugins' tools and hooks, and a report of every entry point seen."""

    def __init__(self) -> None:
        self._loaded: dict[str, _Loaded] = {}
        self._refused: list[PluginReport] = []

    @classmethod
    def installed(cls, platform: str = sys.platform) -> PluginRegistry:
        """The plugins installed in this environment."""
        found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        return cls.from_entry_points(sorted(found, key=lambda ep: ep.name), platform)

    @classmethod
    def from_entry_points(
        cls, entry_points: Iterable[importlib.metadata.EntryPoint], platform: str = sys.platform
    ) -> PluginRegistry:
        registry = cls()
        for entry_point in entry_points:
            registry._add(entry_point, platform)
        return registry

    def _add(self, entry_point: importlib.metadata.EntryPoint, platform: str) -> None:
        dist = entry_point.dist
        source = f"{dist.name} {dist.version}" if dist is not None else entry_point.value
        try:
            plugin = _plugin_of(entry_point)
            manifest = _manifest_of(plugin)
            if not manifest.runs_here(platform):
                raise PluginRefused(
                    f"platforms: it is for {manifest.platforms}, not this {platform} machine"
                )
            _check_kinds(manifest, plugin)
            self._check_names(manifest, plugin)
        except PluginRefused as refusal:
            self._refused.append(
                PluginReport(
                    entry_point=entry_point.name,
                    source=source,
                    status="refused",
                    reason=str(refusal),
                )
            )
            return
        self._loaded[manifest.name] = _Loaded(manifest, plugin, entry_point.name, source)

    def _check_names(self, manifest: PluginManifest, plugin: Plugin) -> None:
        """No plugin replaces a built-in or an earlier plugin's name, tool or hook."""
        if manifest.name in self._loaded:
            other = self._loaded[manifest.name].source
            raise PluginRefused(f"name: '{manifest.name}' is already the name of {other}")
        names = [tool.name for tool in plugin.tools]
        for tool in plugin.tools:
            _check_tool(tool)
            _provided_once("tools", names, tool.name)
            if tool.name in TOOL_SPECS:
                raise PluginRefused(
                    f"tools: '{tool.name}' is the name of a built-in tool; a plugin cannot "
                    "replace a built-in, so rename the plugin's tool"
                )
            owner = next((p for p in self._loaded.values() if tool.name in _tool_names(p)), None)
            if owner is not None:
                raise PluginRefused(
                    f"tools: '{tool.name}' is already provided by the plugin "
                    f"{owner.manifest.name} ({owner.source})"
                )
        hook_names = [hook.name for hook in plugin.hooks]
        for hook in plugin.hooks:
            if hook.event not in get_args(HookEvent):
                raise PluginRefused(
                    f"hooks: '{hook.name}' has event {hook.event!r}; "
                    f"use one of {list(get_args(HookEvent))}"
                )
            _provided_once("hooks", hook_names, hook.name)
        self._check_providers(plugin)

    def _check_providers(self, plugin: Plugin) -> None:
        """Each provider's claims are valid and no model name is claimed twice."""
        names = [getattr(provider, "name", None) for provider in plugin.providers]
        claimed: dict[str, str] = {
            claim: f"the built-in {adapter} adapter"
            for adapter, claims in BUILTIN_CLAIMS.items()
            for claim in claims
        }
        for loaded in self._loaded.values():
            for provider in loaded.plugin.providers:
                for claim in provider.models:
                    claimed[claim] = (
                        f"the provider {loaded.manifest.name}/{provider.name} ({loaded.source})"
                    )
        taken = set(BUILTIN_CLAIMS) | {
            p.name for loaded in self._loaded.values() for p in loaded.plugin.providers
        }
        for provider in plugin.providers:
            _check_provider(provider)
            _provided_once("providers", names, provider.name)
            if provider.name in taken:
                raise PluginRefused(
                    f"providers: '{provider.name}' is already the name of a model provider; "
                    "rename the plugin's provider"
                )
            for claim in provider.models:
                other = first_overlap(claim, claimed)
                if other is not None:
                    raise PluginRefused(
                        f"providers.{provider.name}.models: '{claim}' overlaps '{other}', "
                        f"which {claimed[other]} claims; a plugin cannot take model names "
                        "from another adapter, so claim names of your own (e.g. 'acme/*')"
                    )
                claimed[claim] = f"the provider '{provider.name}' of this plugin"

    def refuse(self, name: str, reason: str) -> None:
        """Take back a loaded plugin (its agent files turned out wrong)."""
        loaded = self._loaded.pop(name)
        self._refused.append(
            PluginReport(
                entry_point=loaded.entry_point,
                source=loaded.source,
                status="refused",
                name=name,
                version=loaded.manifest.version,
                reason=reason,
            )
        )

    def note_agents(self, name: str, agents: list[str]) -> None:
        self._loaded[name].agent_names = list(agents)

    # -- what the catalog, the workflow and the activities need ----------------------

    def agent_dirs(self) -> list[tuple[str, Path | Traversable]]:
        """(plugin, directory) of each loaded plugin that ships agent files."""
        return [(n, p.plugin.agents) for n, p in self._loaded.items() if p.plugin.agents]

    def tool_refs(self) -> dict[str, PluginToolRef]:
        """Every loaded plugin tool, as the workflow's gate sees it."""
        return {
            tool.name: tool_ref(loaded.manifest.name, tool)
            for loaded in self._loaded.values()
            for tool in loaded.plugin.tools
        }

    def hook_refs(self) -> list[HookRef]:
        """Every loaded hook, in the order hooks run: by plugin name, then hook name."""
        return [
            HookRef(plugin=name, name=hook.name, event=hook.event, tools=hook.tools)
            for name in sorted(self._loaded)
            for hook in sorted(self._loaded[name].plugin.hooks, key=lambda h: h.name)
        ]

    def tool(self, name: str) -> PluginTool | None:
        for loaded in self._loaded.values():
            for tool in loaded.plugin.tools:
                if tool.name == name:
                    return tool
        return None

    def provider_for(self, model: str) -> ProviderRef | None:
        """The provider plugin that claims `model`; claims never overlap, so one at most."""
        for loaded in self._loaded.values():
            for provider in loaded.plugin.providers:
                if any(matches(claim, model) for claim in provider.models):
                    return ProviderRef(loaded.manifest.name, provider)
        return None

    def hook(self, key: str) -> PluginHook | None:
        plugin, _, name = key.partition("/")
        loaded = self._loaded.get(plugin)
        if loaded is None:
            return None
        return next((h for h in loaded.plugin.hooks if h.name == name), None)

    def report(self) -> list[PluginReport]:
        """Loaded plugins first, then the refused ones, each in name order."""
        loaded = [
            PluginReport(
                entry_point=p.entry_point,
                source=p.source,
                status="loaded",
                name=p.manifest.name,
                version=p.manifest.version,
                kinds=tuple(p.manifest.kinds),
                tools=tuple(_tool_names(p)),
                hooks=tuple(f"{h.event} {h.name}" for h in p.plugin.hooks),
                agents=tuple(p.agent_names),
                providers=tuple(f"{v.name} ({', '.join(v.models)})" for v in p.plugin.providers),
            )
            for p in sorted(self._loaded.values(), key=lambda p: p.manifest.name)
        ]
        return loaded + sorted(self._refused, key=lambda r: r.entry_point)


def _tool_names(loaded: _Loaded) -> list[str]:
    return [tool.name for tool in loaded.plugin.tools]


def _plugin_of(entry_point: importlib.metadata.EntryPoint) -> Plugin:
    try:
        target = entry_point.load()
    except Exception as exc:  # a plugin that cannot be imported must not stop the process
        raise PluginRefused(
            f"could not be imported ({entry_point.value}): {type(exc).__name__}: {exc}"
        ) from None
    if callable(target) and not isinstance(target, Plugin):
        try:
            target = target()
        except Exception as exc:
            raise PluginRefused(
                f"{entry_point.value} failed to build its plugin: {type(exc).__name__}: {exc}"
            ) from None
    if not isinstance(target, Plugin):
        raise PluginRefused(
            f"{entry_point.value} is a {type(target).__name__}, not a worker.plugins.Plugin"
        )
    return target


def _manifest_of(plugin: Plugin) -> PluginManifest:
    try:
        return PluginManifest.model_validate(dict(plugin.manifest))
    except ValidationError as exc:
        problems = "; ".join(
            f"manifest.{'.'.join(str(p) for p in err['loc']) or 'manifest'}: {err['msg']}"
            for err in exc.errors()
        )
        raise PluginRefused(problems) from None
    except (TypeError, ValueError) as exc:
        raise PluginRefused(f"manifest: must be a mapping of fields ({exc})") from None


def _check_kinds(manifest: PluginManifest, plugin: Plugin) -> None:
    """What a plugin provides and the kinds it declares agree, both ways."""
    provided: dict[PluginKind, bool] = {
        "tool": bool(plugin.tools),
        "hook": bool(plugin.hooks),
        "agents": plugin.agents is not None,
        "provider": bool(plugin.providers),
    }
    for kind, present in provided.items():
        if kind in manifest.kinds and not present:
            raise PluginRefused(f"manifest.kinds: lists '{kind}' but the plugin provides none")
        if present and kind not in manifest.kinds:
            raise PluginRefused(
                f"manifest.kinds: the plugin provides '{kind}' but does not list it"
            )


def _provided_once(section: str, names: Sequence[str | None], name: str) -> None:
    """A plugin names each of its tools, hooks and providers once."""
    if names.count(name) > 1:
        raise PluginRefused(f"{section}: '{name}' is provided twice")


def _check_tool(tool: PluginTool) -> None:
    if not TOOL_NAME.match(tool.name) or tool.name.startswith(MCP_PREFIX):
        raise PluginRefused(
            f"tools: {tool.name!r} is not a usable tool name (letters, digits, _ and -, at "
            f"most 64, not starting with {MCP_PREFIX})"
        )
    if tool.risk not in get_args(Risk):
        raise PluginRefused(f"tools: '{tool.name}' has risk {tool.risk!r}; use {get_args(Risk)}")
    if not (isinstance(tool.args_model, type) and issubclass(tool.args_model, BaseModel)):
        raise PluginRefused(f"tools: '{tool.name}' needs args_model, a pydantic model class")
    if not callable(tool.run):
        raise PluginRefused(f"tools: '{tool.name}' has no callable run")
    if not tool.description.strip():
        raise PluginRefused(f"tools: '{tool.name}' needs a description the model can read")
    properties = tool.args_model.model_json_schema().get("properties", {})
    if tool.subject_arg is not None and tool.subject_arg not in properties:
        raise PluginRefused(f"tools: '{tool.name}' subject_arg {tool.subject_arg!r} is no argument")


def _check_provider(provider: object) -> None:
    if not isinstance(provider, PluginProvider):
        raise PluginRefused(
            f"providers: {type(provider).__name__} is not a worker.plugins.PluginProvider"
        )
    if not isinstance(provider.name, str) or not PROVIDER_NAME.match(provider.name):
        raise PluginRefused(
            f"providers: {provider.name!r} is not a usable provider name "
            "(^[a-z][a-z0-9_-]{0,39}$)"
        )
    if not callable(provider.complete):
        raise PluginRefused(f"providers.{provider.name}: it has no callable complete")
    if isinstance(provider.models, str) or not provider.models:
        raise PluginRefused(
            f"providers.{provider.name}.models: list the model names it serves, e.g. ['acme/*']"
        )
    for claim in provider.models:
        problem = claim_problem(claim)
        if problem is not None:
            raise PluginRefused(f"providers.{provider.name}.models: {problem}")
    claims = list(provider.models)
    for i, claim in enumerate(claims):
        other = first_overlap(claim, claims[i + 1 :])
        if other is not None:
            raise PluginRefused(
                f"providers.{provider.name}.models: '{claim}' and '{other}' overlap; "
                "claim each model name once"
            )


def tool_ref(plugin: str, tool: PluginTool) -> PluginToolRef:
    """What the gate needs of a plugin tool: its risk and its top-level arguments."""
    schema = tool.args_model.model_json_schema()
    properties: dict[str, Any] = schema.get("properties", {})
    return PluginToolRef(
        name=tool.name,
        plugin=plugin,
        risk=tool.risk,
        read_only=tool.read_only,
        properties={name: _json_type(spec) for name, spec in properties.items()},
        required=list(schema.get("required", [])),
        closed=not schema.get("additionalProperties", False),
        subject_arg=tool.subject_arg,
        secret_prompt=tool.secret_prompt,
    )


def _json_type(spec: Mapping[str, Any]) -> JsonType:
    kind = spec.get("type")
    return kind if isinstance(kind, str) and kind in _JSON_TYPES else "any"  # type: ignore[return-value]
