"""Validation problems read as sentences naming what the user gave, never pydantic's words."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field, PydanticUserError, ValidationError

import keel.api.core
from keel.api.core.plain_errors import PATTERN_WORDS, plain_message
from keel.api.core.push_configs import PushConfigOrder
from keel.api.core.schemas.runs import RunCreate

JARGON = ("should", "Input", "String", "valid", "pattern", "^")


class Order(BaseModel):
    count: int = Field(default=1, gt=0)
    share: float = Field(default=0.5, ge=0, le=1)
    kind: Literal["a", "b"] = "a"


def problems(schema: type[BaseModel], **fields: Any) -> list[str]:
    with pytest.raises(ValidationError) as refused:
        schema(**fields)
    return [plain_message(e) for e in refused.value.errors()]


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"count": 0}, "Must be more than 0, not 0."),
        ({"count": "many"}, "Must be a whole number, not 'many'."),
        ({"count": 1.5}, "Must be a whole number, not 1.5."),
        ({"share": 2}, "Must be at most 1, not 2."),
        ({"share": -1}, "Must be at least 0, not -1."),
        ({"share": "half"}, "Must be a number, not 'half'."),
        ({"kind": "c"}, "Must be one of 'a' or 'b', not 'c'."),
    ],
)
def test_each_kind_is_a_sentence_with_the_value_given(fields: dict[str, Any], said: str) -> None:
    assert problems(Order, **fields) == [said]


def test_a_pattern_is_said_in_words_and_a_missing_field_is_required() -> None:
    said = problems(RunCreate, agent="review", input="Look.", workspace=".", approver="alice")
    assert said == [
        "Must be `user:` and a user id without spaces, such as user:alice, not 'alice'."
    ]
    assert problems(RunCreate, agent="review") == ["Required; give it a value."] * 2
    for sentence in said:
        assert not any(word in sentence for word in JARGON), sentence


def test_a_secret_or_a_long_value_is_not_repeated_back() -> None:
    [said] = problems(PushConfigOrder, url="https://hooks.example/x", token="two\nlines")
    assert said == "Must be one line, without line breaks.", said
    [long] = problems(Order, count="9" * 100 + "x")
    assert long == "Must be a whole number.", long
    with pytest.raises(ValidationError) as refused:
        Order(count=0)
    assert plain_message(refused.value.errors()[0], show_input=False) == "Must be more than 0."


def _request_patterns() -> set[str]:
    """Every `pattern` in the JSON schema of every model under keel.api.core."""
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    found.add(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for info in pkgutil.walk_packages(keel.api.core.__path__, "keel.api.core."):
        module = importlib.import_module(info.name)
        for _, model in inspect.getmembers(module, inspect.isclass):
            if issubclass(model, BaseModel) and model.__module__ == module.__name__:
                try:
                    walk(model.model_json_schema())
                except PydanticUserError:  # a model with no JSON schema has no pattern
                    continue
    return found


def test_every_pattern_a_request_can_fail_has_words() -> None:
    patterns = _request_patterns()
    assert r"^https?://\S+$" in patterns  # the walk finds them
    assert patterns <= set(PATTERN_WORDS), patterns - set(PATTERN_WORDS)
