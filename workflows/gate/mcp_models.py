"""External MCP servers: an agent's server spec and the discovery payloads."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Short, lower-case, no `__` and no trailing separator: `mcp__<server>__<tool>` then
# splits at its first `__` after the prefix, and stays within 64 characters.
MCP_SERVER_NAME = r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$"


MCP_SERVER_NAME_MAX = 20


class McpServerSpec(BaseModel):
    """An external MCP server whose tools an agent uses, over streamable HTTP."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        pattern=MCP_SERVER_NAME,
        max_length=MCP_SERVER_NAME_MAX,
        description="Short identifier: tools are offered as `mcp__<name>__<tool>`.",
    )
    url: str = Field(max_length=2000, description="The server's streamable HTTP endpoint.")
    tools: list[str] | None = Field(
        default=None, description="The server's tools the agent may use; None: all it lists."
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        scheme, sep, rest = url.partition("://")
        if not sep or scheme.lower() not in ("http", "https") or not rest.strip("/"):
            raise ValueError("an MCP server URL must be an http:// or https:// URL")
        if any(c.isspace() for c in url):
            raise ValueError("an MCP server URL may not contain whitespace")
        authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
        if "@" in authority:
            raise ValueError(
                "an MCP server URL may not carry credentials; put its token in KEEL_MCP_TOKENS"
            )
        return url


class McpDiscoveryInput(BaseModel):
    """Input of `discover_mcp_tools`: list the servers' tools and store their definitions."""

    run_id: str
    servers: list[McpServerSpec]
    tenant_id: str | None = Field(
        default=None, description="The run's tenant, for servers called as the user."
    )
    requester: str | None = Field(
        default=None, description="The run's user (`user:ID`), for servers called as the user."
    )
    credential_refs: dict[str, str] = Field(
        default_factory=dict,
        description="Server name → the `secret_ref` the user answered with their credential.",
    )


class CredentialAsk(BaseModel):
    """A server called as the user, who has no credential for it: what to ask them."""

    server: str
    prompt: str


class McpDiscoveryResult(BaseModel):
    """Output of `discover_mcp_tools`: names only; the definitions are in Postgres."""

    tools: list[str] = Field(default_factory=list, description="Model-visible tool names.")
    unavailable: list[str] = Field(
        default_factory=list, description="Servers that could not be reached."
    )
    needs_credential: list[CredentialAsk] = Field(
        default_factory=list,
        description="Servers called as the user that need the user's credential first.",
    )
