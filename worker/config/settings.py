"""Keel's settings: the one place that reads the environment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, AliasChoices, Field, SecretStr
from pydantic_settings import SettingsConfigDict

from keel.activities.credentials.backends import UserCredentialBackend
from keel.activities.llm.limits import ProviderLimit, check_unique
from keel.activities.llm.prices import DEFAULT_PRICES, ModelPrice
from keel.activities.masking.policy import MaskingPolicy
from keel.worker.config.identity_settings import IdentitySettings
from keel.worker.config.sizing import DATABASE_POOL_SIZE
from keel.worker.config.telemetry_settings import TelemetrySettings


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class Settings(IdentitySettings, TelemetrySettings):
    """Configuration from environment variables; every field has a working default."""

    model_config = SettingsConfigDict(extra="ignore")

    temporal_address: str | None = Field(
        default=None,
        validation_alias=_env("TEMPORAL_ADDRESS"),
        description="host:port of a Temporal frontend; unset starts the embedded dev server.",
    )
    temporal_namespace: str = Field(default="default", validation_alias=_env("TEMPORAL_NAMESPACE"))
    task_queue: str = Field(default="keel", validation_alias=_env("KEEL_TASK_QUEUE"))
    database_url: str | None = Field(
        default=None,
        validation_alias=_env("DATABASE_URL"),
        description="Postgres URL; unset starts the embedded Postgres under the data directory.",
    )
    openai_base_url: str = Field(
        default="https://api.openai.com/v1", validation_alias=_env("OPENAI_BASE_URL")
    )
    openai_api_key: SecretStr = Field(
        default=SecretStr("not-set"), validation_alias=_env("OPENAI_API_KEY")
    )
    github_token: SecretStr | None = Field(
        default=None,
        validation_alias=_env("KEEL_GITHUB_TOKEN", "GITHUB_TOKEN"),
        description="The `list_issues` tool's GitHub token; none: anonymous (public repos).",
    )
    github_api_url: str = Field(
        default="https://api.github.com", validation_alias=_env("KEEL_GITHUB_API_URL")
    )
    anthropic_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=_env("ANTHROPIC_API_KEY"),
        description="Models named `claude-…` or `anthropic/…` go to Anthropic's Messages API.",
    )
    anthropic_base_url: str = Field(
        default="https://api.anthropic.com", validation_alias=_env("ANTHROPIC_BASE_URL")
    )
    anthropic_max_tokens: int = Field(
        default=8192,
        ge=1,
        le=128_000,
        validation_alias=_env("KEEL_ANTHROPIC_MAX_TOKENS"),
        description="`max_tokens` of each Messages call (the API requires one).",
    )
    model: str = Field(default="gpt-4.1-mini", validation_alias=_env("KEEL_MODEL"))
    model_context_window: int | None = Field(
        default=None,
        ge=1024,
        validation_alias=_env("KEEL_MODEL_CONTEXT_WINDOW"),
        description="Context window of the default model in tokens; unset: known or learnt.",
    )
    context_budget: bool = Field(
        default=True,
        validation_alias=_env("KEEL_CONTEXT_BUDGET"),
        description="Cap, prune and compact to fit the window; off sends everything as is.",
    )
    coverage_plans: bool = Field(
        default=True,
        validation_alias=_env("KEEL_COVERAGE_PLANS"),
        description="Agents with `coverage: files` (the review agent) have Keel plan and "
        "check the reading of every file; off: they read what their model chooses.",
    )
    memory_embedding_model: str = Field(
        default="text-embedding-3-small",
        min_length=1,
        validation_alias=_env("KEEL_MEMORY_EMBEDDING_MODEL"),
        description="Embeddings model of agent memory (where Postgres has pgvector).",
    )
    memory_model: str | None = Field(
        default=None,
        validation_alias=_env("KEEL_MEMORY_MODEL"),
        description="Model that proposes facts to remember; unset: the run's model.",
    )
    memory_recall_limit: int = Field(
        default=8,
        ge=1,
        le=50,
        validation_alias=_env("KEEL_MEMORY_RECALL_LIMIT"),
        description="Memories a run's model is given at most.",
    )
    llm_timeout_s: float = Field(default=300.0, gt=0, validation_alias=_env("KEEL_LLM_TIMEOUT_S"))
    llm_keepalive_s: float = Field(
        default=4.0,
        gt=0,
        validation_alias=_env("KEEL_LLM_KEEPALIVE_S"),
        description=(
            "Seconds an idle connection to the model's endpoint stays in the worker's pool. "
            "Below the endpoint's own keep-alive (uvicorn's, and so vLLM's, is 5 s), so the "
            "server never closes a connection just as the worker sends on it."
        ),
    )
    llm_max_attempts: int = Field(default=6, ge=1, validation_alias=_env("KEEL_LLM_MAX_ATTEMPTS"))
    provider_limits: Annotated[list[ProviderLimit], AfterValidator(check_unique)] = Field(
        default_factory=list,
        validation_alias=_env("KEEL_PROVIDER_LIMITS"),
        description="Rate limits per provider endpoint (and key), shared by every worker, "
        'JSON: [{"base_url": "https://api.openai.com/v1", "requests": 500, "tokens": '
        '200000, "concurrent": 20, "window_s": 60}] (docs/operations.md).',
    )
    data_dir: Path = Field(
        default=Path.home() / ".keel",
        validation_alias=_env("KEEL_DATA_DIR"),
        description="Embedded Temporal and Postgres data, saved reports.",
    )
    workspace_root: Path = Field(
        default_factory=Path.cwd,
        validation_alias=_env("KEEL_WORKSPACE_ROOT"),
        description="Runs may only work on directories inside this root.",
    )
    workspace_tenancy: Literal["shared", "per-tenant"] = Field(
        default="shared",
        validation_alias=_env("KEEL_WORKSPACE_TENANCY"),
        description=(
            "`shared`: every tenant's workspaces lie anywhere under KEEL_WORKSPACE_ROOT (one "
            "user or one team). `per-tenant`: a tenant's lie under KEEL_WORKSPACE_ROOT/{tenant} "
            "and no other tenant's are found (docs/operations.md)."
        ),
    )
    agents_dir: Path | None = Field(
        default=None,
        validation_alias=_env("KEEL_AGENTS_DIR"),
        description="Extra agent definitions (*.md); they override built-ins of the same name.",
    )
    a2a_default_agent: str = Field(
        default="review",
        validation_alias=_env("KEEL_A2A_DEFAULT_AGENT"),
        description="The agent that A2A's `/a2a` endpoint and the root agent card speak for.",
    )
    api_host: str = Field(default="127.0.0.1", validation_alias=_env("KEEL_API_HOST"))
    api_port: int = Field(default=8470, validation_alias=_env("KEEL_API_PORT"))
    a2a_tokens: dict[str, SecretStr] = Field(
        default_factory=dict,
        validation_alias=_env("KEEL_A2A_TOKENS"),
        description='Bearer tokens for remote A2A agents, JSON: {"https://agent.example": "tok"}.',
    )
    mcp_tokens: dict[str, SecretStr] = Field(
        default_factory=dict,
        validation_alias=_env("KEEL_MCP_TOKENS"),
        description=(
            "Bearer tokens for agents' MCP servers, by URL prefix, JSON: "
            '{"https://mcp.example.com": "tok"}; the longest matching prefix wins.'
        ),
    )
    user_credentials: dict[str, UserCredentialBackend] = Field(
        default_factory=dict,
        validation_alias=_env("KEEL_USER_CREDENTIALS"),
        description=(
            "Tool backends (MCP servers, A2A agents) called as the run's user, by URL prefix, "
            'JSON: {"https://mcp.example.com": {"grant": "token_exchange", "token_url": ...}}'
            " (docs/identity.md, Per-user credentials for tool backends)."
        ),
    )
    mcp_timeout_s: float = Field(
        default=120.0,
        gt=0,
        le=240,
        validation_alias=_env("KEEL_MCP_TIMEOUT_S"),
        description="How long a call to an MCP server may take before it counts as failed.",
    )
    public_url: str | None = Field(
        default=None,
        validation_alias=_env("KEEL_PUBLIC_URL"),
        description="The API's URL as others reach it, for A2A agent cards; default: as asked.",
    )
    api_url: str | None = Field(
        default=None,
        validation_alias=_env("KEEL_API_URL"),
        description="Where the CLI finds a running API; defaults to api_host:api_port.",
    )
    temporal_port: int = Field(default=7233, validation_alias=_env("KEEL_TEMPORAL_PORT"))
    temporal_ui_port: int = Field(default=8233, validation_alias=_env("KEEL_TEMPORAL_UI_PORT"))
    max_cached_workflows: int = Field(
        default=1000,
        ge=0,
        validation_alias=_env("KEEL_MAX_CACHED_WORKFLOWS"),
        description="Runs kept in worker memory; more avoids replays when many runs wait.",
    )
    max_parallel_subagents: int = Field(
        default=4,
        ge=1,
        le=64,
        validation_alias=_env("KEEL_MAX_PARALLEL_SUBAGENTS"),
        description=(
            "`task` calls of one step that run at once; an agent's "
            "`limits.max_parallel_subagents` overrides it."
        ),
    )
    max_concurrent_activities: int = Field(
        default=100, ge=1, validation_alias=_env("KEEL_MAX_CONCURRENT_ACTIVITIES")
    )
    database_pool_size: int = Field(
        default=DATABASE_POOL_SIZE,
        ge=1,
        le=500,
        validation_alias=_env("KEEL_DATABASE_POOL_SIZE"),
        description="Postgres connections a worker keeps at most.",
    )
    workflow_sandbox: bool = Field(
        default=False,
        validation_alias=_env("KEEL_WORKFLOW_SANDBOX"),
        description=(
            "Run workflow code in Temporal's sandbox, which catches nondeterministic code "
            "at a cost in CPU and memory. Keel's tests run in it; workers need not."
        ),
    )
    workspace_trees: bool = Field(
        default=False,
        validation_alias=_env("KEEL_WORKSPACE_TREES"),
        description=(
            "Where a run's workspace is a git work tree: record a commit of its files "
            "before the run's first write and after each step that wrote (refs under "
            "refs/keel/; the work tree, index and branches are left alone), so a fork "
            "can start from the tree as it was at its step (docs/forks.md)."
        ),
    )
    bash_sandbox: Literal["bwrap", "off"] = Field(
        default="bwrap",
        validation_alias=_env("KEEL_BASH_SANDBOX"),
        description=(
            "`bwrap`: `bash` commands run in a bubblewrap sandbox (own PID namespace, "
            "read-only file system but the workspace, no network); without `bwrap` "
            "installed, `bash` answers with an error. `off`: run them unconfined."
        ),
    )

    auth_mode: Literal["jwt", "off"] = Field(
        default="jwt",
        validation_alias=_env("KEEL_AUTH"),
        description="`off` trusts every caller as a local admin: for local development only.",
    )
    jwt_secret: SecretStr | None = Field(
        default=None,
        validation_alias=_env("KEEL_JWT_SECRET"),
        description="HS256 secret; unset (and no JWKS URL): one is made in the data directory.",
    )
    jwks_url: str | None = Field(default=None, validation_alias=_env("KEEL_JWKS_URL"))
    jwt_issuer: str | None = Field(default=None, validation_alias=_env("KEEL_JWT_ISSUER"))
    jwt_audience: str | None = Field(default=None, validation_alias=_env("KEEL_JWT_AUDIENCE"))
    token: SecretStr | None = Field(
        default=None,
        validation_alias=_env("KEEL_TOKEN"),
        description="Bearer token the CLI sends; unset: minted from the local secret.",
    )
    prices: dict[str, ModelPrice] = Field(
        default_factory=lambda: dict(DEFAULT_PRICES),
        validation_alias=_env("KEEL_PRICES"),
        description=(
            'Price table, JSON: {"model": {"input_per_mtok": 0.4, "output_per_mtok": 1.6}}.'
        ),
    )
    max_body_bytes: int = Field(
        default=1_000_000, ge=1024, validation_alias=_env("KEEL_MAX_BODY_BYTES")
    )
    webhook_secret: SecretStr | None = Field(
        default=None,
        validation_alias=_env("KEEL_WEBHOOK_SECRET"),
        description=(
            "Server secret each tenant's webhook signing secret derives from; unset: the "
            "JWT secret, else a file in the data directory. Give the API and every worker "
            "the same value."
        ),
    )

    webhook_targets: Literal["public", "loopback", "private"] = Field(
        default="loopback",
        validation_alias=_env("KEEL_WEBHOOK_TARGETS"),
        description=(
            "Which addresses webhook and A2A push URLs may resolve to, checked at "
            "registration and before each delivery: `public` only, also `loopback` (the "
            "default, for one-machine dev stacks), or also `private` (private, link-local "
            "and other non-public networks). Set `public` on a shared deployment."
        ),
    )
    webhook_allow_http: bool = Field(
        default=False,
        validation_alias=_env("KEEL_WEBHOOK_ALLOW_HTTP"),
        description="Send plain http to public receivers too (otherwise https only).",
    )

    console_secret: SecretStr | None = Field(
        default=None,
        validation_alias=_env("KEEL_CONSOLE_SECRET"),
        description=(
            "Secret the console's session cookies derive from; unset: the JWT secret, else a "
            "file in the data directory. Give every API replica the same value."
        ),
    )
    console_session_s: int = Field(
        default=8 * 3600,
        ge=60,
        le=30 * 86_400,
        validation_alias=_env("KEEL_CONSOLE_SESSION_S"),
        description="How long a console sign-in lasts, in seconds (never past a pasted token).",
    )

    # -- operations: encrypted payloads ---------------------------------------------
    payload_keys: dict[str, SecretStr] = Field(
        default_factory=dict,
        validation_alias=_env("KEEL_PAYLOAD_KEYS"),
        description=(
            'AES-GCM keys by key id, JSON: {"2026-12": "<base64 of 32 bytes>"} (`keel keys '
            "new` makes one). Set: every payload Keel sends to Temporal is encrypted. Keep "
            "retired keys here so the runs they encrypted still decrypt. Give the API and "
            "every worker the same value."
        ),
    )
    payload_key_id: str | None = Field(
        default=None,
        validation_alias=_env("KEEL_PAYLOAD_KEY_ID"),
        description="The key new payloads are encrypted with; unset: the only key.",
    )
    masking_policy: MaskingPolicy = Field(
        default_factory=MaskingPolicy,
        validation_alias=_env("KEEL_MASKING_POLICY"),
        description=(
            'Fields masked in stored tool arguments and outputs, JSON: {"rules": [{"field": '
            '"ssn", "action": "last"}]} (docs/identity.md); originals are sealed with '
            "KEEL_PAYLOAD_KEYS, which it needs."
        ),
    )
    masking_hash_key: SecretStr | None = Field(
        default=None,
        validation_alias=_env("KEEL_MASKING_HASH_KEY"),
        description="The key of `hash` masking (32+ characters); unset: one derived from "
        "the current payload key, so rotating that key changes the hashes.",
    )
    codec_cors_origins: list[str] = Field(
        default_factory=list,
        validation_alias=_env("KEEL_CODEC_CORS_ORIGINS"),
        description=(
            'Temporal Web UI origins that may call the codec endpoint, JSON: ["https://'
            "temporal.example.com\"]; the embedded UI's (localhost:KEEL_TEMPORAL_UI_PORT) "
            "is always allowed."
        ),
    )

    # -- operations: retention -----------------------------------------------------
    retention_sweep_interval_s: int = Field(
        default=86_400,
        ge=60,
        validation_alias=_env("KEEL_RETENTION_SWEEP_INTERVAL_S"),
        description=(
            "How often the retention schedule empties runs past their tenant's policy; "
            "applied when a policy is set or a sweep asked for."
        ),
    )

    # -- operations: rolling out a new version --------------------------------------
    worker_build_id: str | None = Field(
        default=None,
        validation_alias=_env("KEEL_WORKER_BUILD_ID"),
        description=(
            "Set (e.g. to the image tag): the worker joins Temporal's Worker Deployment "
            "KEEL_WORKER_DEPLOYMENT as this version, and gets work once an operator makes the "
            "version current (docs/operations.md). Unset: an unversioned worker, as before."
        ),
    )
    worker_deployment: str = Field(
        default="keel",
        validation_alias=_env("KEEL_WORKER_DEPLOYMENT"),
        description="The Worker Deployment versioned workers join (KEEL_WORKER_BUILD_ID).",
    )
    worker_versioning: Literal["auto-upgrade", "pinned"] = Field(
        default="auto-upgrade",
        validation_alias=_env("KEEL_WORKER_VERSIONING"),
        description=(
            "What a versioned worker's runs do when another version becomes current: "
            "`auto-upgrade` moves them to it (workflow changes behind `workflow.patched`), "
            "`pinned` keeps each on the version it started on until it ends."
        ),
    )

    @property
    def resolved_api_url(self) -> str:
        return self.api_url or f"http://{self.api_host}:{self.api_port}"


def settings_from(**fields: object) -> Settings:
    """Settings from field names (not environment names), for code and tests."""
    values: dict[str, object] = {}
    for name, value in fields.items():
        alias = Settings.model_fields[name].validation_alias
        assert isinstance(alias, AliasChoices), name
        values[str(alias.choices[0])] = value
    return Settings.model_validate(values)


def environment_of(settings: Settings, *names: str) -> dict[str, str]:
    """The environment variables that give another process these fields of `settings`.

    The inverse of `settings_from`, for starting `keel worker` as production does.
    """
    env: dict[str, str] = {}
    for name in names:
        alias = Settings.model_fields[name].validation_alias
        assert isinstance(alias, AliasChoices), name
        value = getattr(settings, name)
        if value is None:
            continue
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        env[str(alias.choices[0])] = str(value)
    return env
