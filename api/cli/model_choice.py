"""Which model a Keel started here talks to.

With no model configured (none of `KEEL_MODEL`, `OPENAI_BASE_URL`, `OPENAI_API_KEY`,
`ANTHROPIC_API_KEY`), or with `--model scripted`, the stack gets the scripted reviewer:
an OpenAI-compatible server in this process that needs no network and no key, so a
newcomer's first `keel dev` and `keel review` work offline. A model that is configured
but cannot work without a key it lacks is refused before anything starts, with the
sentence that says what to set, rather than failing the first run half a minute later.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from keel.activities.llm.providers import anthropic_messages
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import StackError
from keel.worker.scripted.llm import Script, ScriptedLLMServer

__all__ = ["SCRIPTED", "ModelChoice", "chosen_model", "missing_key"]

SCRIPTED = "scripted"
"""The offline model's name: `keel dev --model scripted`, and what its runs record."""

# Any of these set in the environment means the user chose a model to talk to.
_MODEL_FIELDS = ("model", "openai_base_url", "openai_api_key", "anthropic_api_key")
_OPENAI_DEFAULT_URL = Settings.model_fields["openai_base_url"].default
_UNSET_KEY = Settings.model_fields["openai_api_key"].default.get_secret_value()

HOW_TO_USE_A_REAL_MODEL = (
    "For a real model set OPENAI_API_KEY (with KEEL_MODEL, and OPENAI_BASE_URL for another "
    "endpoint), or ANTHROPIC_API_KEY with KEEL_MODEL=claude-…, and start again."
)


@dataclass(frozen=True)
class ModelChoice:
    """The settings a stack starts with, and what to tell the user about its model."""

    settings: Settings
    offline: bool

    def banner(self) -> list[str]:
        """Lines for the start-up banner: which model, where, and whether offline."""
        s = self.settings
        if self.offline:
            return [
                f"{s.model} at {s.openai_base_url}: offline, no model is configured",
                "(a scripted reviewer that lists and reads files and reports `# BUG:` lines)",
                HOW_TO_USE_A_REAL_MODEL,
            ]
        if anthropic_messages.serves(s.model):
            return [f"{s.model} (Anthropic, {s.anthropic_base_url})"]
        return [f"{s.model} at {s.openai_base_url}"]


def missing_key(settings: Settings, model: str) -> str | None:
    """Why `model` cannot work with these settings for want of a key, or None."""
    if anthropic_messages.serves(model):
        if settings.anthropic_api_key is None:
            return (
                f"The model {model} is Anthropic's and ANTHROPIC_API_KEY is not set: export "
                "ANTHROPIC_API_KEY=sk-ant-…, or start with `keel dev --model scripted` to use "
                "the offline scripted model."
            )
        return None
    from keel.worker.plugins.registry import PluginRegistry  # loads entry points: only here

    if PluginRegistry.installed().provider_for(model) is not None:
        return None  # a provider plugin's model: its adapter knows what it needs
    unset = settings.openai_api_key.get_secret_value() == _UNSET_KEY
    if unset and settings.openai_base_url.rstrip("/") == _OPENAI_DEFAULT_URL:
        return (
            f"The model {model} goes to {_OPENAI_DEFAULT_URL} and OPENAI_API_KEY is not set: "
            "export OPENAI_API_KEY=sk-…, point OPENAI_BASE_URL at a server that needs no key "
            "(vLLM, Ollama, LiteLLM), or start with `keel dev --model scripted` to use the "
            "offline scripted model."
        )
    return None


def _configured(settings: Settings) -> bool:
    return any(name in settings.model_fields_set for name in _MODEL_FIELDS)


@contextmanager
def chosen_model(settings: Settings, requested: str | None = None) -> Iterator[ModelChoice]:
    """The settings to start a stack with: the scripted model served here while the
    context lasts when `requested` is `scripted`, or when nothing names a model;
    otherwise the requested or configured model, checked for its key (StackError)."""
    if requested == SCRIPTED or (requested is None and not _configured(settings)):
        with ScriptedLLMServer(Script(name=SCRIPTED, policy="reviewer")) as llm:
            offline = settings.model_copy(
                update={"openai_base_url": llm.base_url, "model": SCRIPTED}
            )
            yield ModelChoice(offline, offline=True)
        return
    if requested is not None:
        settings = settings.model_copy(update={"model": requested})
    problem = missing_key(settings, settings.model)
    if problem is not None:
        raise StackError(problem)
    yield ModelChoice(settings, offline=False)
