"""The price table: what an LLM call costs."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ModelPrice(BaseModel):
    """USD per million tokens."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok
        ) / 1_000_000


DEFAULT_PRICES = {
    "gpt-4.1": ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0),
    "gpt-4.1-mini": ModelPrice(input_per_mtok=0.4, output_per_mtok=1.6),
    "gpt-4.1-nano": ModelPrice(input_per_mtok=0.1, output_per_mtok=0.4),
    "gpt-4o": ModelPrice(input_per_mtok=2.5, output_per_mtok=10.0),
    "gpt-4o-mini": ModelPrice(input_per_mtok=0.15, output_per_mtok=0.6),
}
