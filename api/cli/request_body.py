"""Requests built from command-line values: a bad value is a sentence, not a traceback."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.markup import escape

from keel.api.cli.flag_names import COMMAND_FLAGS, error_lines
from keel.api.core.schemas.runs import RunCreate
from keel.worker.config.settings import Settings

err_console = Console(stderr=True)
M = TypeVar("M", bound=BaseModel)


def request_body(schema: type[M], /, *, flags: Mapping[str, str] | None = None, **fields: Any) -> M:
    """`schema(**fields)`, or exit 1 naming each field that is wrong and why, by the flag
    the user typed (`flags` where the command's differ from `flag_names.FLAGS`); the
    API's answer to the request names them too."""
    COMMAND_FLAGS.set(flags or {})
    try:
        return schema(**fields)
    except ValidationError as exc:
        for line in error_lines(exc.errors(), default=schema.__name__, flags=flags):
            err_console.print(f"[red]error:[/red] {escape(line)}", highlight=False)
        raise typer.Exit(code=1) from None


def ignored_model(settings: Settings, body: RunCreate, model: str) -> bool:
    """Whether this shell set KEEL_MODEL but a Keel already running chose another model:
    that Keel reads its own environment, so the user's setting did nothing."""
    return body.model is None and "model" in settings.model_fields_set and model != settings.model


def model_option(value: str | None) -> str | list[str] | None:
    """`--model a,b` as the list it names (a, then b when a fails a step); one name as is."""
    if value is None or "," not in value:
        return value
    return [name.strip() for name in value.split(",")]
