"""Agent definitions as data: Markdown files with YAML front matter."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from keel.worker.plugins.registry import PluginRegistry
from keel.workflows.gate.mcp_models import McpServerSpec
from keel.workflows.gate.permissions import PermissionRule
from keel.workflows.gate.plugin_refs import PluginToolRef
from keel.workflows.gate.tool_specs import TOOL_SPECS
from keel.workflows.router.models import ROUTER_AGENT
from keel.workflows.run.agent_spec import AgentSpec, ApprovalPolicy, Limits
from keel.workflows.run.model_list import split_models

FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*\r?$\n?(.*)\Z", re.DOTALL | re.MULTILINE)


class AgentDefinitionError(ValueError):
    """An agent file is malformed; the message names the file and the field."""


class AgentFrontMatter(BaseModel):
    """The YAML header of an agent file."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,63}$")
    description: str = ""
    model: str | list[str] | None = Field(
        default=None, description="A model, or a list: the others take a step the first fails."
    )
    tools: list[str] = Field(default_factory=list)
    limits: Limits = Field(default_factory=Limits)
    permissions: list[PermissionRule] = Field(default_factory=list)
    approval: ApprovalPolicy = Field(default_factory=ApprovalPolicy)
    mcp_servers: list[McpServerSpec] = Field(default_factory=list)
    context_window: int | None = Field(default=None, ge=1024, le=100_000_000)
    memory: bool = Field(
        default=False, description="Remember what users state, per tenant and user (opt-in)."
    )
    subagents: list[str] = Field(default_factory=list, max_length=32)
    client_tools: list[Literal["read_file", "list_files", "search_code"]] = Field(
        default_factory=list, description="Reads the client that starts a run executes."
    )
    roles: list[str] = Field(
        default_factory=list,
        max_length=32,
        description="Roles the router may send callers of to this agent; empty: everyone.",
    )
    coverage: Literal["model", "files"] = Field(
        default="model",
        description="`files`: Keel plans the reading of every file in parts run by the "
        "`explore` agent and reports what its records show was read.",
    )

    @field_validator("name")
    @classmethod
    def _not_the_router(cls, name: str) -> str:
        if name == ROUTER_AGENT:
            raise ValueError(f"'{ROUTER_AGENT}' is the router's name; choose another agent name")
        return name

    @field_validator("subagents")
    @classmethod
    def _distinct_subagents(cls, names: list[str]) -> list[str]:
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"sub-agent names must be distinct; repeated: {repeated}")
        return names

    @field_validator("mcp_servers")
    @classmethod
    def _distinct_servers(cls, servers: list[McpServerSpec]) -> list[McpServerSpec]:
        names = [s.name for s in servers]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"MCP server names must be distinct; repeated: {repeated}")
        return servers

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, tools: list[str], info: ValidationInfo) -> list[str]:
        plugin_tools = (info.context or {}).get("plugin_tools", {})
        unknown = [t for t in tools if t not in TOOL_SPECS and t not in plugin_tools]
        if unknown:
            available = sorted([*TOOL_SPECS, *plugin_tools])
            raise ValueError(f"unknown tools {unknown}; available: {available}")
        return tools

    @field_validator("model")
    @classmethod
    def _model_list(cls, model: str | list[str] | None) -> str | list[str] | None:
        split_models(model)  # an empty list, a name twice: refused with what to fix
        return model

    @model_validator(mode="after")
    def _client_tools_are_tools(self) -> AgentFrontMatter:
        missing = [t for t in self.client_tools if t not in self.tools]
        if missing:
            raise ValueError(f"client_tools {missing} must be listed in `tools` too")
        return self

    @model_validator(mode="after")
    def _task_needs_subagents(self) -> AgentFrontMatter:
        if "task" in self.tools and not self.subagents:
            raise ValueError(
                "the `task` tool runs sub-agents: list them in `subagents` "
                "(e.g. subagents: [explore]) or remove `task` from `tools`"
            )
        return self


def parse_agent(
    text: str, source: str, plugin_tools: Mapping[str, PluginToolRef] | None = None
) -> AgentSpec:
    """Parse one agent file's text; it may list the loaded plugins' tools too."""
    plugin_tools = plugin_tools or {}
    if not text.startswith("---"):
        raise AgentDefinitionError(f"{source}: an agent file starts with '---' YAML front matter.")
    match = FRONT_MATTER.match(text)
    if match is None:
        raise AgentDefinitionError(f"{source}: the front matter has no closing '---' line.")
    header, body = match.group(1), match.group(2)
    try:
        data = yaml.safe_load(header) or {}
    except yaml.YAMLError as exc:
        raise AgentDefinitionError(f"{source}: invalid YAML front matter: {exc}") from exc
    if not isinstance(data, dict):
        raise AgentDefinitionError(f"{source}: the front matter must be a YAML mapping.")
    try:
        meta = AgentFrontMatter.model_validate(data, context={"plugin_tools": plugin_tools})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise AgentDefinitionError(f"{source}: {problems}") from exc
    prompt = body.strip()
    if not prompt:
        raise AgentDefinitionError(f"{source}: the system prompt (the body) is empty.")
    return AgentSpec(
        name=meta.name,
        description=meta.description,
        system_prompt=prompt,
        model=split_models(meta.model)[0],
        fallback_models=split_models(meta.model)[1],
        tools=meta.tools,
        limits=meta.limits,
        permissions=meta.permissions,
        approval=meta.approval,
        mcp_servers=meta.mcp_servers,
        context_window=meta.context_window,
        memory=meta.memory,
        subagents=meta.subagents,
        plugin_tools=[plugin_tools[t] for t in meta.tools if t in plugin_tools],
        client_tools=list(meta.client_tools),
        roles=list(meta.roles),
        coverage=meta.coverage,
    )


SUBAGENTS_SECTION = (
    "## Sub-agents\n"
    "You may hand a part of the work to one of these agents with the `task` tool "
    "(`agent`, `prompt`). Each starts fresh and sees only your prompt, so say exactly "
    "what to look at and what to report; its final answer comes back as the tool "
    "result. Several `task` calls in one reply run in parallel.\n"
)


def link_subagents(agents: dict[str, AgentSpec], sources: dict[str, str]) -> dict[str, AgentSpec]:
    """Check each agent's `subagents` against the catalog and tell its model about them.

    An unknown name is an error of the file that names it, found when the catalog
    loads (the API and the worker refuse to start), not when a run first calls it.
    """
    linked: dict[str, AgentSpec] = {}
    for name, spec in agents.items():
        if spec.coverage == "files" and "explore" not in agents:
            raise AgentDefinitionError(
                f"{sources[name]}: coverage: files runs its parts with the `explore` agent, "
                "which is not defined; define it, or set coverage: model."
            )
        if not spec.subagents:
            linked[name] = spec
            continue
        unknown = [n for n in spec.subagents if n not in agents]
        if unknown:
            raise AgentDefinitionError(
                f"{sources[name]}: subagents: unknown agents {unknown}; "
                f"known agents: {sorted(agents)}."
            )
        lines = [f"- `{n}`: {agents[n].description or 'no description'}" for n in spec.subagents]
        prompt = f"{spec.system_prompt}\n\n{SUBAGENTS_SECTION}" + "\n".join(lines)
        linked[name] = spec.model_copy(update={"system_prompt": prompt})
    return linked


class AgentCatalog:
    """Built-in agents, then installed plugins' agents (which may not replace a built-in),
    then those of a user's directory (which win on name clashes).

    Every agent's spec carries the installed hooks, so its runs call them; with no
    hook installed, a run makes no hook call at all.
    """

    def __init__(self, agents: dict[str, AgentSpec], plugins: PluginRegistry) -> None:
        self._agents = agents
        # Definitions are read once, at start: nothing served from them changes after this.
        self.loaded_at = datetime.now(UTC).replace(microsecond=0)
        self.plugins = plugins

    @classmethod
    def load(
        cls,
        extra_dir: Path | None = None,
        plugins: PluginRegistry | None = None,
        *,
        coverage_plans: bool = True,
    ) -> AgentCatalog:
        """The catalog; without `coverage_plans`, `coverage: files` agents read as their model
        chooses (`KEEL_COVERAGE_PLANS=false`)."""
        plugins = plugins if plugins is not None else PluginRegistry.installed()
        agents: dict[str, AgentSpec] = {}
        sources: dict[str, str] = {}
        _load_plugin_agents(plugins, agents, sources)
        tools = plugins.tool_refs()
        for file in sorted(resources.files("keel.worker.agents").iterdir(), key=lambda f: f.name):
            if file.name.endswith(".md"):
                spec = parse_agent(file.read_text(), f"built-in {file.name}", tools)
                agents[spec.name] = spec
                sources[spec.name] = f"built-in {file.name}"
        if extra_dir is not None:
            if not extra_dir.is_dir():
                raise AgentDefinitionError(f"Agents directory {extra_dir} does not exist.")
            for path in sorted(extra_dir.glob("*.md")):
                spec = parse_agent(path.read_text(), str(path), tools)
                agents[spec.name] = spec
                sources[spec.name] = str(path)
        hooks = plugins.hook_refs()
        if hooks:
            agents = {n: s.model_copy(update={"hooks": hooks}) for n, s in agents.items()}
        if not coverage_plans:
            agents = {n: s.model_copy(update={"coverage": "model"}) for n, s in agents.items()}
        return cls(link_subagents(agents, sources), plugins)

    def get(self, name: str) -> AgentSpec | None:
        return self._agents.get(name)

    def names(self) -> list[str]:
        return sorted(self._agents)

    def all(self) -> list[AgentSpec]:
        return [self._agents[n] for n in self.names()]


def _agent_files(directory: Path | Traversable) -> list[Traversable]:
    return sorted((f for f in directory.iterdir() if f.name.endswith(".md")), key=lambda f: f.name)


def _load_plugin_agents(
    plugins: PluginRegistry, agents: dict[str, AgentSpec], sources: dict[str, str]
) -> None:
    """Each plugin's agent files, all or none: a bad file or a taken name refuses the plugin.

    A plugin never replaces a built-in agent or another plugin's; a user's agents
    directory, read later, may replace a plugin's.
    """
    builtin = {
        f.name.removesuffix(".md")
        for f in resources.files("keel.worker.agents").iterdir()
        if f.name.endswith(".md")
    }
    for plugin, directory in plugins.agent_dirs():
        tools = plugins.tool_refs()
        try:
            found = [
                (parse_agent(f.read_text(), f"plugin {plugin}: {f.name}", tools), f.name)
                for f in _agent_files(directory)
            ]
            for spec, file in found:
                if spec.name in builtin or spec.name in agents:
                    owner = "a built-in agent" if spec.name in builtin else sources[spec.name]
                    raise AgentDefinitionError(
                        f"{file}: '{spec.name}' is the name of {owner}; "
                        "a plugin cannot replace it, so rename the plugin's agent"
                    )
        except (AgentDefinitionError, OSError) as exc:
            plugins.refuse(plugin, f"agents: {exc}")
            continue
        for spec, file in found:
            agents[spec.name] = spec
            sources[spec.name] = f"plugin {plugin}: {file}"
        plugins.note_agents(plugin, [spec.name for spec, _ in found])
