"""Provider limits and model lists as they are configured: refused with what to fix."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from keel.activities.llm.limits import ProviderLimit, endpoint_of, key_hash
from keel.activities.llm.limits.headers import MAX_BLOCK_S, blocked_for
from keel.api.cli.request_body import model_option
from keel.api.core.schemas.runs import RunCreate
from keel.worker.agent_catalog import AgentDefinitionError, parse_agent
from keel.worker.config.settings import settings_from
from keel.workflows.run.model_list import split_models

AGENT = "---\nname: twice\nmodel: {model}\n---\nYou answer.\n"


def test_a_limit_is_matched_by_endpoint_and_counted_per_key() -> None:
    limit = ProviderLimit(base_url="HTTPS://API.example.com/v1/", requests=60)
    assert limit.base_url == "https://api.example.com/v1"
    assert limit.covers("https://api.example.com/v1", "sk-a")
    assert not limit.covers("https://other.example.com/v1", "sk-a")
    assert endpoint_of("https://api.example.com/v1/") == limit.base_url
    # The state is kept under a hash: two keys apart, and never the key itself.
    assert key_hash("sk-a") != key_hash("sk-b") and "sk-a" not in key_hash("sk-a")
    only_b = ProviderLimit(
        base_url="https://api.example.com/v1", requests=60, key_sha256=key_hash("sk-b")[:8]
    )
    assert only_b.covers(limit.base_url, "sk-b") and not only_b.covers(limit.base_url, "sk-a")
    # Calls are spread over the window and a little more, never closer than it allows.
    assert 1.0 < limit.request_interval_s < 1.01


@pytest.mark.parametrize(
    ("entry", "sentence"),
    [
        ({"base_url": "https://api.example.com/v1"}, "sets none of requests, tokens or"),
        ({"base_url": "api.example.com", "requests": 5}, "is not an http(s) URL"),
        ({"base_url": "https://a.example", "requests": 0}, "greater than or equal to 1"),
        (
            {"base_url": "https://a.example", "requests": 5, "key_sha256": "sk-live"},
            "never the key",
        ),
        ({"base_url": "https://a.example", "requests": 5, "burst": 2}, "Extra inputs"),
    ],
)
def test_a_bad_limit_is_refused_with_what_to_fix(entry: dict[str, object], sentence: str) -> None:
    with pytest.raises(ValidationError, match=sentence.replace("(", r"\(").replace(")", r"\)")):
        ProviderLimit.model_validate(entry)


def test_an_endpoint_named_twice_is_refused() -> None:
    twice = [{"base_url": "https://a.example/v1", "requests": 5}] * 2
    with pytest.raises(ValidationError, match=r"names https://a\.example/v1 twice"):
        settings_from(provider_limits=twice)
    assert settings_from().provider_limits == []


def test_a_providers_headers_say_how_long_everyone_waits() -> None:
    assert blocked_for(200, {}) == 0
    assert blocked_for(429, {"retry-after": "2"}) == 2
    assert blocked_for(429, {"retry-after-ms": "1500", "retry-after": "2"}) == 1.5
    assert blocked_for(200, {"x-ratelimit-remaining-requests": "3"}) == 0
    spent = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1m6.5s"}
    assert blocked_for(200, spent) == 66.5
    tokens = {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "20ms"}
    assert blocked_for(200, tokens) == pytest.approx(0.02)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    at = (now + timedelta(seconds=7)).isoformat().replace("+00:00", "Z")
    anthropic = {
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": at,
    }
    assert blocked_for(200, anthropic, now=now) == 7
    # Nonsense is no wait, and no answer holds the endpoint back for ever.
    assert blocked_for(429, {"retry-after": "soon"}) == 0
    assert blocked_for(429, {"retry-after": "86400"}) == MAX_BLOCK_S


@pytest.mark.parametrize(
    ("model", "sentence"),
    [
        ([], "is an empty list; name at least one model"),
        (["a", "b", "a"], "lists a twice; name each model once"),
        (["a", "has space"], "is not a model name"),
        ([f"m{i}" for i in range(6)], "list at most 5"),
    ],
)
def test_a_bad_model_list_is_refused_everywhere_it_is_given(model: object, sentence: str) -> None:
    with pytest.raises(ValueError, match=sentence):
        split_models(model)
    with pytest.raises(ValidationError, match=sentence):
        RunCreate.model_validate({"agent": "a", "input": "x", "workspace": ".", "model": model})
    if isinstance(model, list):
        with pytest.raises(AgentDefinitionError, match=sentence):
            parse_agent(AGENT.format(model=model), "twice.md")


def test_a_model_that_is_neither_a_name_nor_a_list_is_refused() -> None:
    with pytest.raises(ValueError, match="is a model name or a list of them, not int"):
        split_models(3)


def test_a_model_list_names_the_first_model_and_its_fallbacks() -> None:
    assert split_models(["a", "b", "c"]) == ("a", ["b", "c"])
    assert split_models("a") == ("a", []) and split_models(None) == (None, [])
    spec = parse_agent(AGENT.format(model="[primary, backup]"), "twice.md")
    assert (spec.model, spec.fallback_models) == ("primary", ["backup"])
    # On the command line: --model a,b.
    assert model_option("primary, backup") == ["primary", "backup"]
    assert model_option("gpt-4.1") == "gpt-4.1" and model_option(None) is None
