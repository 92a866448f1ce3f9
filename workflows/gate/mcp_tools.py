"""Tools from external MCP servers, as the gate sees them: names, permissions, specs.

A tool `lookup` of the agent's server `tickets` is offered to the model as
`mcp__tickets__lookup` and matched by permission rules as `mcp:tickets:lookup`.
Pure code: the activities that list and call the servers use the same names.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from keel.workflows.gate.mcp_models import McpServerSpec
from keel.workflows.gate.tool_specs import McpToolArgs, ToolArgs, ToolSpec

MCP_PREFIX = "mcp__"
MCP_SEPARATOR = "__"
# OpenAI's rule for function names: ^[a-zA-Z0-9_-]{1,64}$.
MAX_TOOL_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_HASH_CHARS = 8


def mcp_tool_name(server: str, tool: str) -> str:
    """The name the model sees for `tool` of `server`.

    The server's own name when it is safe and short enough; otherwise its unsafe
    characters become `_`, it is cut to fit, and a hash of the original keeps it unique.
    """
    prefix = f"{MCP_PREFIX}{server}{MCP_SEPARATOR}"
    room = MAX_TOOL_NAME - len(prefix)
    safe = _UNSAFE.sub("_", tool)
    if safe == tool and 0 < len(tool) <= room:
        return prefix + tool
    tag = hashlib.sha256(tool.encode()).hexdigest()[:_HASH_CHARS]
    return f"{prefix}{safe[: room - _HASH_CHARS - 1]}_{tag}"


def split_mcp_tool_name(name: str) -> tuple[str, str] | None:
    """(server, tool part) of a model-visible MCP tool name, or None if it is not one."""
    if not name.startswith(MCP_PREFIX):
        return None
    server, sep, tool = name[len(MCP_PREFIX) :].partition(MCP_SEPARATOR)
    if not server or not sep or not tool:
        return None
    return server, tool


def _arguments_json(args: ToolArgs) -> str:
    return json.dumps(args.model_dump(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def mcp_tool_spec(name: str) -> ToolSpec:
    """The spec of a discovered MCP tool: external risk, its arguments as the subject."""
    parts = split_mcp_tool_name(name)
    assert parts is not None, name
    server, tool = parts
    return ToolSpec(
        name=name,
        description=f"Tool {tool} of the MCP server {server}.",
        risk="external",
        group="mcp",
        read_only=False,
        args_model=McpToolArgs,
        subject_of=_arguments_json,
        permission=f"mcp:{server}:{tool}",
    )


@dataclass(frozen=True)
class McpToolset:
    """The MCP tools one run may call: discovered at its start, and allowlisted."""

    servers: tuple[McpServerSpec, ...] = ()
    discovered: tuple[str, ...] = ()
    unavailable: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        return [name for name in self.discovered if self._allowed(name)]

    def spec(self, name: str) -> ToolSpec | None:
        """The spec of a tool the run may call, or None."""
        if name not in self.discovered or not self._allowed(name):
            return None
        return mcp_tool_spec(name)

    def unreachable_server(self, name: str) -> str | None:
        """The server of `name` if it is one of the agent's and was down at the start."""
        parts = split_mcp_tool_name(name)
        if parts is None or parts[0] not in self.unavailable:
            return None
        return parts[0]

    def _allowed(self, name: str) -> bool:
        parts = split_mcp_tool_name(name)
        if parts is None:
            return False
        server = next((s for s in self.servers if s.name == parts[0]), None)
        if server is None:
            return False
        if server.tools is None:
            return True
        return name in {mcp_tool_name(server.name, tool) for tool in server.tools}
