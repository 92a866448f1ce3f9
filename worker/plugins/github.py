"""`list_issues`: a repository's issues and pull requests from the GitHub REST API.

Keel's own plugin, installed with Keel through the same `keel.plugins` entry point as
any other (`github = "keel.worker.plugins.github:github_plugin"`), and the `issues` agent
that uses it. The token comes from the worker's settings (`KEEL_GITHUB_TOKEN` or
`GITHUB_TOKEN`), never from the model or the history. Pages are followed by the
`Link` header; a rate-limit answer (403 or 429 with `x-ratelimit-remaining: 0` or
`retry-after`) is waited out when the wait is short, and otherwise reported with
what was read so far.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import datetime
from importlib.resources import files
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

from keel.activities.plugin_api import PluginTool, ToolContext
from keel.worker.config.settings import Settings
from keel.worker.plugins.registry import Plugin

PER_PAGE = 100
# The longest rate-limit wait a call sits through; beyond it the model gets what was read.
MAX_RATE_LIMIT_WAIT_S = 60.0
RATE_LIMIT_RETRIES = 3
BODY_CHARS = 300
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


class ListIssuesArgs(BaseModel):
    """Arguments of `list_issues`."""

    model_config = ConfigDict(extra="forbid")

    repo: str = Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$", description="owner/name")
    state: Literal["open", "closed", "all"] = Field(default="open")
    labels: str | None = Field(default=None, description="Comma-separated label names.")
    include_pulls: bool = Field(default=True, description="Also list pull requests.")
    max_items: int = Field(default=300, ge=1, le=2000, description="Stop after this many.")


class GitHubIssues:
    """Reads issues page by page, with one client per call."""

    def __init__(self, api_url: str, token: str | None, timeout_s: float = 30.0) -> None:
        self._api_url = api_url.rstrip("/")
        self._token = token
        self._timeout_s = timeout_s

    async def list_issues(self, args: ListIssuesArgs, context: ToolContext) -> str:
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "keel-issues",
        }
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        params: dict[str, str | int] = {"state": args.state, "per_page": PER_PAGE}
        if args.labels:
            params["labels"] = args.labels
        url: str | None = f"{self._api_url}/repos/{args.repo}/issues"
        seen: set[str] = set()
        items: list[dict[str, Any]] = []
        note = ""
        async with httpx.AsyncClient(headers=headers, timeout=self._timeout_s) as client:
            while url is not None and url not in seen and len(items) < args.max_items:
                seen.add(url)
                response, note = await _get(client, url, params)
                if response is None:
                    break
                params = {}  # the next link carries them
                page = response.json()
                if not isinstance(page, list):
                    raise RuntimeError(f"GitHub answered {url} with no list of issues")
                items += [i for i in page if args.include_pulls or "pull_request" not in i]
                url = _next_link(response.headers.get("link", ""))
        return _listing(args, items[: args.max_items], note)


async def _get(
    client: httpx.AsyncClient, url: str, params: dict[str, str | int]
) -> tuple[httpx.Response | None, str]:
    """One page, waiting out short rate limits; (None, why) when GitHub will not answer."""
    for _ in range(RATE_LIMIT_RETRIES + 1):
        # No `params` on a next link: httpx would replace the link's own query with them.
        response = await client.get(url, params=params or None)
        wait = _rate_limit_wait(response)
        if wait is None:
            if response.status_code == 404:
                raise RuntimeError("GitHub has no such repository, or the token cannot see it")
            if response.status_code in (401, 403):
                raise RuntimeError(f"GitHub refused the request ({response.status_code})")
            response.raise_for_status()
            return response, ""
        if wait > MAX_RATE_LIMIT_WAIT_S:
            break
        await asyncio.sleep(wait)
    return None, "GitHub's rate limit stopped the listing here; ask again later for the rest."


def _rate_limit_wait(response: httpx.Response) -> float | None:
    """Seconds to wait before asking again, if this is a rate-limit answer."""
    if response.status_code not in (403, 429):
        return None
    retry_after = response.headers.get("retry-after")
    if retry_after is not None:
        try:
            return max(float(retry_after), 0.0)
        except ValueError:
            return MAX_RATE_LIMIT_WAIT_S + 1
    if response.headers.get("x-ratelimit-remaining") == "0":
        reset = float(response.headers.get("x-ratelimit-reset", "0") or 0)
        return max(reset - time.time(), 0.0) + 0.5
    return None


def _next_link(header: str) -> str | None:
    match = _NEXT.search(header)
    return match[1] if match else None


def _listing(args: ListIssuesArgs, items: list[dict[str, Any]], note: str) -> str:
    """One line per issue (and an excerpt of its body), newest update first as GitHub sends."""
    lines = [f"{args.repo}: {len(items)} {args.state} issues and pull requests"]
    for item in items:
        kind = "PR" if "pull_request" in item else "issue"
        labels = ",".join(str(label.get("name", "")) for label in item.get("labels") or [])
        user = (item.get("user") or {}).get("login", "?")
        updated = _day(item.get("updated_at"))
        lines.append(
            f"#{item.get('number')} [{kind}] [{item.get('state')}]"
            f"{f' [{labels}]' if labels else ''} {item.get('title', '').strip()}"
            f" — by {user}, created {_day(item.get('created_at'))}, updated {updated},"
            f" {item.get('comments', 0)} comments"
        )
        body = " ".join(str(item.get("body") or "").split())
        if body:
            cut = "…" if len(body) > BODY_CHARS else ""
            lines.append(f"    {body[:BODY_CHARS]}{cut}")
    if note:
        lines.append(note)
    return "\n".join(lines)


def _day(value: object) -> str:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).date().isoformat()
    except ValueError:
        return "?"


def github_plugin() -> Plugin:
    """The plugin, with the worker's GitHub settings."""
    settings = Settings()
    token = settings.github_token.get_secret_value() if settings.github_token else None
    github = GitHubIssues(settings.github_api_url, token)
    return Plugin(
        manifest={
            "name": "github",
            "version": "1.0.0",
            "kinds": ["tool", "agents"],
            "description": "Reads a repository's issues and pull requests; the issues agent.",
        },
        tools=[
            PluginTool(
                name="list_issues",
                description=(
                    "List a GitHub repository's issues (and pull requests, marked PR): number, "
                    "state, labels, title, author, dates, comments and the start of the body."
                ),
                args_model=ListIssuesArgs,
                risk="read",
                run=github.list_issues,
                subject_arg="repo",
            )
        ],
        agents=files("keel.worker.plugins") / "github_agents",
    )
