"""The masking policy: which fields of tool arguments and outputs are masked, and how.

A rule names its fields by key (`field`: that key at any depth, any case) or by a
JSON path (`path`: `$.employees[*].ssn`, `$.owner.phone`, `$.rows[0].salary`), says
what to do with the value (`hash`, `last`, `bracket`, `mask`) and may be limited to
some tools (`tools`: globs over tool names). The policy is validated when Keel starts,
so a rule that could never match, or a bracket without bounds, stops it with a sentence
rather than leaving data unmasked.
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["MaskAction", "MaskingPolicy", "MaskingRule", "PathStep", "parse_path"]

MaskAction = Literal["hash", "last", "bracket", "mask"]

PathStep = str | int | None
"""One step of a JSON path: a key, a list index, or None for every item (`[*]`, `.*`)."""

_PATH_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_\-]*)|\.\*|\[(\*|\d+)\]|\[\"([^\"]+)\"\]")


def parse_path(path: str) -> list[PathStep]:
    """The steps of a JSON path such as `$.employees[*].ssn`; ValueError with a sentence."""
    if not path.startswith("$"):
        raise ValueError(f"JSON path {path!r} must start with `$` (e.g. `$.employees[*].ssn`).")
    steps: list[PathStep] = []
    at = 1
    while at < len(path):
        found = _PATH_STEP.match(path, at)
        if found is None:
            raise ValueError(
                f"JSON path {path!r} is not understood at {path[at:]!r}: use `.key`, "
                '`["key"]`, `[N]`, `[*]` or `.*` steps.'
            )
        key, index, quoted = found.group(1), found.group(2), found.group(3)
        if key is not None:
            steps.append(key)
        elif quoted is not None:
            steps.append(quoted)
        elif index is not None and index != "*":
            steps.append(int(index))
        else:
            steps.append(None)
        at = found.end()
    if not steps:
        raise ValueError(f"JSON path {path!r} names the whole value; name a field in it.")
    return steps


class MaskingRule(BaseModel):
    """One rule: these fields, this treatment."""

    model_config = ConfigDict(extra="forbid")

    field: str | None = Field(default=None, min_length=1, max_length=200)
    """A key name, matched at any depth and in any case (`ssn` matches `SSN`)."""
    path: str | None = Field(default=None, min_length=2, max_length=500)
    """A JSON path from the top of the value, e.g. `$.employees[*].salary`."""
    action: MaskAction
    """`hash`: a keyed HMAC (equal values give equal hashes, none can be reversed);
    `last`: all but the last `keep` letters and digits become `*`; `bracket`: a number
    becomes the range of `bounds` it falls in; `mask`: every digit becomes `*`, except a
    phone number's leading `+` country code and the last `keep` digits."""
    keep: int = Field(default=4, ge=0, le=32)
    """For `last`, how many trailing letters and digits stay; for `mask`, how many
    trailing digits stay (its default keeps none: set `keep` explicitly to keep some)."""
    bounds: list[float] = Field(default_factory=list, max_length=100)
    """For `bracket`: ascending bounds, e.g. `[0, 50000, 100000, 150000]`."""
    tools: list[str] = Field(default_factory=lambda: ["*"], min_length=1)
    """Globs over tool names the rule applies to; every tool by default."""

    @model_validator(mode="after")
    def _one_selector_and_complete(self) -> MaskingRule:
        if (self.field is None) == (self.path is None):
            raise ValueError("a masking rule names exactly one of `field` or `path`")
        if self.path is not None:
            parse_path(self.path)
        if self.action == "bracket":
            if len(self.bounds) < 2:
                raise ValueError(
                    "a `bracket` rule needs at least two ascending `bounds`, "
                    "e.g. [0, 50000, 100000]"
                )
            if any(later <= earlier for earlier, later in pairwise(self.bounds)):
                raise ValueError(f"the `bounds` of a `bracket` rule must ascend: {self.bounds}")
        elif self.bounds:
            raise ValueError(f"`bounds` belong to `bracket` rules, not to `{self.action}`")
        return self

    @property
    def steps(self) -> list[PathStep] | None:
        return parse_path(self.path) if self.path is not None else None

    @property
    def keep_digits(self) -> int:
        """What `mask` keeps at the end: nothing unless the rule set `keep`."""
        return self.keep if "keep" in self.model_fields_set else 0


class MaskingPolicy(BaseModel):
    """What is masked in the readable copies of tool calls (events, stored outputs, audit)."""

    model_config = ConfigDict(extra="forbid")

    rules: list[MaskingRule] = Field(default_factory=list, max_length=500)
    """Applied in order; the first rule that matches a field decides it."""

    @field_validator("rules")
    @classmethod
    def _distinct(cls, rules: list[MaskingRule]) -> list[MaskingRule]:
        seen: set[tuple[str, str, tuple[str, ...]]] = set()
        for rule in rules:
            key = (
                "field" if rule.field is not None else "path",
                (rule.field or "").lower() if rule.field is not None else str(rule.path),
                tuple(rule.tools),
            )
            if key in seen:
                raise ValueError(
                    f"two masking rules name the same {key[0]} {key[1]!r}; keep one of them"
                )
            seen.add(key)
        return rules

    @property
    def enabled(self) -> bool:
        return bool(self.rules)
