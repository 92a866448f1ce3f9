"""What a client sends to fork a run (`POST /v1/runs/{id}/fork`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from keel.api.core.schemas.common import ChosenId, InputText, StoredText


class ForkCreate(BaseModel):
    """Start a new run from a run's conversation up to and including one of its steps."""

    step: int = Field(
        ge=0,
        le=1_000_000,
        description="The last step of the original the fork keeps: a step is one model call "
        "and the results of the tool calls it asked for (and a nudge Keel sent before it); "
        "0 keeps only the system prompt and the task. A step past the run's is a 422.",
    )
    message: InputText | None = Field(
        default=None,
        description="A user message the fork's model reads after the kept steps (a hint, "
        "a correction); with `replace_message`, the task it starts from instead.",
    )
    replace_message: bool = Field(
        default=False,
        description="The message replaces the original's task (its opening user message) "
        "instead of following the kept steps; needs `message`.",
    )
    run_id: ChosenId | None = Field(
        default=None,
        description="The new run's id, as in POST /v1/runs: the same request again answers "
        "with the same run, the same id with another request is a 409.",
    )
    workspace: StoredText | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="Another directory to run the fork on (default: the original's), e.g. a "
        "git worktree of the original's `forked_tree`; the same checks as POST /v1/runs.",
    )
    trigger: Literal["api", "cli"] = "api"
    """Who asked, as in POST /v1/runs."""

    @model_validator(mode="after")
    def _replacement_has_a_message(self) -> ForkCreate:
        if self.replace_message and self.message is None:
            raise ValueError("replace_message needs a message: the task the fork starts from.")
        return self
