"""What every resource's schemas share: stored text, chosen ids, task text, problems."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field

from keel.api.core.plain_errors import task_text


def storable(value: str) -> str:
    """Refuse text with NUL characters, which Postgres cannot store, before it reaches a query.

    (Lone surrogates, which it cannot store either, pydantic refuses on its own.)
    """
    if "\x00" in value:
        raise ValueError("Text may not contain NUL (\\u0000) characters; remove them and retry.")
    return value


StoredText = Annotated[str, AfterValidator(storable)]
"""A string from a request that ends up in Postgres."""


ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
"""Run and session ids a client chooses: what Temporal and URLs take without escaping."""


MAX_INPUT_CHARS = 200_000
"""The longest task a run takes, on every surface."""


ChosenId = Annotated[str, Field(pattern=ID_PATTERN)]


# The tools a client may run on its own files: the built-in reads.
LocalTool = Literal["read_file", "list_files", "search_code"]
"""A run or session id a client chose."""


InputText = Annotated[
    str,
    Field(min_length=1, max_length=MAX_INPUT_CHARS),
    # After the constraints in this list, so it runs before them (pydantic wraps them).
    BeforeValidator(task_text),
    AfterValidator(storable),
]
"""The task a run is given: some text, not only spaces."""


class FieldProblem(BaseModel):
    """What is wrong with one part of the request, shaped like FastAPI's own 422s."""

    loc: list[str | int] = Field(
        description="Where: `body`, `query`, `path` or `header`, then the field."
    )
    msg: str
    type: str


class Problem(BaseModel):
    """The body of every error answer."""

    detail: str | list[FieldProblem] = Field(description="What went wrong and what to do next.")
