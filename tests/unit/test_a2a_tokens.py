"""A configured A2A token goes only to the origin (and path) it was configured for."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from keel.activities.outbound.url_prefix import url_within
from keel.worker.config.a2a_tokens import A2ATokens
from keel.worker.config.settings import settings_from


@pytest.mark.parametrize(
    ("url", "prefix", "within"),
    [
        ("https://agent.example/a2a", "https://agent.example", True),
        ("https://AGENT.example:443/a2a", "https://agent.example", True),
        ("https://agent.example", "https://agent.example/", True),
        ("https://agent.example.evil.net/a2a", "https://agent.example", False),
        ("https://agent.example@evil.net/a2a", "https://agent.example", False),
        ("https://agent.example:8443/a2a", "https://agent.example", False),
        ("http://agent.example/a2a", "https://agent.example", False),
        ("https://agent.example/a2a/review", "https://agent.example/a2a", True),
        ("https://agent.example/a2a-evil", "https://agent.example/a2a", False),
        ("https://agent.example/a2a?x=1", "https://agent.example/a2a/", True),
    ],
)
def test_a_url_is_within_a_prefix_by_origin_and_path(url: str, prefix: str, within: bool) -> None:
    assert url_within(url, prefix) is within


def test_a_configured_token_goes_only_to_its_own_origin() -> None:
    settings = settings_from(
        a2a_tokens={
            "https://agent.example": SecretStr("tok-root"),
            "https://agent.example/team": SecretStr("tok-team"),
        },
        auth_mode="off",
    )
    tokens = A2ATokens(settings)
    assert tokens("https://agent.example/a2a", "acme", "user:a") == "tok-root"
    assert tokens("https://agent.example/team/a2a", "acme", "user:a") == "tok-team"
    assert tokens("https://agent.example.evil.net/a2a", "acme", "user:a") is None
    assert tokens("https://agent.example@evil.net/", "acme", "user:a") is None
    assert tokens("https://agent.example:444/a2a", "acme", "user:a") is None
