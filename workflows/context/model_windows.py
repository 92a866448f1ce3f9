"""How many tokens a model can take: its context window and what to keep for its answer.

The window of a run's model comes from, in order: the agent file's
`context_window`, `KEEL_MODEL_CONTEXT_WINDOW` (for the default model), the table
of known model families below, and a conservative default. What a provider said
in a `context_length_exceeded` answer is the truth: a learnt limit replaces the
table and the default, and caps a configured window that is larger.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["DEFAULT_WINDOW", "KNOWN_WINDOWS", "ModelWindow", "window_for"]

WindowSource = Literal["agent", "settings", "learned", "table", "default"]

# (name prefix, context window, output reserve); the longest matching prefix wins.
KNOWN_WINDOWS: tuple[tuple[str, int, int], ...] = (
    ("gpt-5", 400_000, 32_768),
    ("gpt-4.1", 1_047_576, 32_768),
    ("gpt-4o", 128_000, 16_384),
    ("gpt-4-turbo", 128_000, 4_096),
    ("gpt-4", 8_192, 2_048),
    ("gpt-3.5-turbo", 16_385, 4_096),
    ("o1", 200_000, 32_768),
    ("o3", 200_000, 32_768),
    ("o4", 200_000, 32_768),
    ("claude-", 200_000, 16_384),
    ("gemini-", 1_048_576, 16_384),
    ("llama-3.1", 131_072, 8_192),
    ("llama-3.2", 131_072, 8_192),
    ("llama-3.3", 131_072, 8_192),
    ("llama3.1", 131_072, 8_192),
    ("llama3.2", 131_072, 8_192),
    ("llama3.3", 131_072, 8_192),
    ("llama-3", 8_192, 2_048),
    ("llama3", 8_192, 2_048),
    ("llama-2", 4_096, 1_024),
    ("llama2", 4_096, 1_024),
    ("qwen", 32_768, 8_192),
    ("mistral-large", 131_072, 8_192),
    ("mistral", 32_768, 8_192),
    ("mixtral", 32_768, 8_192),
    ("deepseek", 65_536, 8_192),
)
# Unknown models: small enough for most models served today, and a provider that
# allows less says so once, after which its limit is used.
DEFAULT_WINDOW = 32_768
DEFAULT_RESERVE = 4_096
# Never reserve more than this share of a window for the answer.
MAX_RESERVE_SHARE = 4


class ModelWindow(BaseModel):
    """The window a run budgets against."""

    context_window: int = Field(ge=1, description="Tokens of prompt plus answer the model takes.")
    output_reserve: int = Field(ge=0, description="Tokens kept free for the model's answer.")
    source: WindowSource = Field(description="Where the window came from.")

    @property
    def usable(self) -> int:
        """Tokens a request may take."""
        return max(1, self.context_window - self.output_reserve)


def window_for(
    model: str,
    *,
    agent: int | None = None,
    settings: int | None = None,
    learned: int | None = None,
) -> ModelWindow:
    """The window of `model`: configured, learnt, known or the default (see the module)."""
    known = _known(model)
    reserve_hint = known[1] if known else DEFAULT_RESERVE
    configured: tuple[int, WindowSource] | None = None
    if agent is not None:
        configured = (agent, "agent")
    elif settings is not None:
        configured = (settings, "settings")
    if configured is not None:
        window, source = configured
        if learned is not None and learned < window:
            window, source = learned, "learned"
    elif learned is not None:
        window, source = learned, "learned"
    elif known is not None:
        window, source = known[0], "table"
    else:
        window, source = DEFAULT_WINDOW, "default"
    reserve = min(reserve_hint, window // MAX_RESERVE_SHARE)
    return ModelWindow(context_window=window, output_reserve=reserve, source=source)


def _known(model: str) -> tuple[int, int] | None:
    name = model.lower().rsplit("/", 1)[-1]
    best: tuple[str, int, int] | None = None
    for prefix, window, reserve in KNOWN_WINDOWS:
        if name.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, window, reserve)
    return (best[1], best[2]) if best else None
