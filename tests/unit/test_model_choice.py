"""Which model a stack started here talks to: the configured one, checked for its key,
or with none configured the scripted model, served here for as long as the stack runs."""

from __future__ import annotations

import httpx
import pytest

from keel.api.cli.model_choice import SCRIPTED, chosen_model, missing_key
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import StackError

MODEL_VARIABLES = ("KEEL_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in MODEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_nothing_configured_serves_the_scripted_model_while_the_stack_lives(
    no_model: None,
) -> None:
    with chosen_model(Settings()) as choice:
        assert choice.offline and choice.settings.model == SCRIPTED
        url = choice.settings.openai_base_url
        assert url.startswith("http://127.0.0.1:")
        models = httpx.get(f"{url}/models").json()
        assert [m["id"] for m in models["data"]] == [SCRIPTED]
        assert "offline" in choice.banner()[0] and "OPENAI_API_KEY" in " ".join(choice.banner())
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models")


def test_scripted_is_chosen_over_a_configured_model(
    no_model: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("KEEL_MODEL", "gpt-4.1")
    with chosen_model(Settings(), SCRIPTED) as choice:
        assert choice.offline and choice.settings.model == SCRIPTED


def test_a_configured_model_with_its_key_is_used_as_it_is(
    no_model: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with chosen_model(Settings()) as choice:
        assert not choice.offline
        assert choice.settings.model == "gpt-4.1-mini"
        assert choice.settings.openai_base_url == "https://api.openai.com/v1"


def test_a_model_without_its_key_is_refused_with_what_to_set(no_model: None) -> None:
    with pytest.raises(StackError, match="OPENAI_API_KEY is not set"):
        with chosen_model(Settings(), "gpt-4.1"):
            pass
    anthropic = missing_key(Settings(), "claude-sonnet-4-5")
    assert anthropic is not None and "ANTHROPIC_API_KEY is not set" in anthropic
    assert "keel dev --model scripted" in anthropic


def test_keys_are_asked_for_only_where_they_are_needed(
    no_model: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")  # e.g. Ollama: no key
    assert missing_key(Settings(), "llama3.1") is None
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert missing_key(Settings(), "claude-sonnet-4-5") is None
