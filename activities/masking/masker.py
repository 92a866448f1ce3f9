"""The policy applied to one tool call's arguments or output text.

Only JSON is masked: a text that does not parse as a JSON object or array is left as it
is (its fields cannot be told apart), which `docs/identity.md` says.
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase

from pydantic import JsonValue

from keel.activities.masking.policy import MaskingPolicy, MaskingRule, PathStep
from keel.activities.masking.treatments import treat

__all__ = ["MIN_QUOTED_CHARS", "Masker"]

# A masked argument shorter than this is not searched for in other text: replacing every
# "42" in an error message would garble it and hide nothing.
MIN_QUOTED_CHARS = 4


class Masker:
    """Masks JSON values by a validated policy, with the key `hash` rules use."""

    def __init__(self, policy: MaskingPolicy, hash_key: bytes) -> None:
        self._policy = policy
        self._hash_key = hash_key

    @property
    def enabled(self) -> bool:
        return self._policy.enabled

    def text(self, tool: str, text: str) -> str | None:
        """The masked copy of a JSON text, or None when nothing in it is masked."""
        rules = self._rules_for(tool)
        if not rules or not text.lstrip().startswith(("{", "[")):
            return None
        try:
            value = json.loads(text)
        except ValueError:
            return None
        masked, changed = self._value(value, rules)
        if not changed:
            return None
        return json.dumps(masked, ensure_ascii=False, indent=2 if "\n" in text else None)

    def quoted(self, tool: str, arguments: str, text: str) -> str | None:
        """`text` with the values the policy masks in `arguments` masked where it quotes
        them (a refusal naming its subject, an error echoing an id); None if it quotes none."""
        rules = self._rules_for(tool)
        if not rules or not text:
            return None
        try:
            value = json.loads(arguments)
        except ValueError:
            return None
        found: list[tuple[str, str]] = []
        self._value(value, rules, (), found)
        changed = text
        for original, masked in sorted(found, key=lambda pair: -len(pair[0])):
            if len(original) >= MIN_QUOTED_CHARS:
                changed = changed.replace(original, masked)
        return changed if changed != text else None

    def value(self, tool: str, value: JsonValue) -> tuple[JsonValue, bool]:
        """The masked copy of a JSON value and whether anything in it changed."""
        rules = self._rules_for(tool)
        return self._value(value, rules) if rules else (value, False)

    def _rules_for(self, tool: str) -> list[MaskingRule]:
        return [
            rule
            for rule in self._policy.rules
            if any(fnmatchcase(tool, pattern) for pattern in rule.tools)
        ]

    def _value(
        self,
        value: JsonValue,
        rules: list[MaskingRule],
        where: tuple[str | int, ...] = (),
        found: list[tuple[str, str]] | None = None,
    ) -> tuple[JsonValue, bool]:
        """Walk the value; at each field, the first rule that names it decides it."""
        entries: list[tuple[str | int, JsonValue]]
        if isinstance(value, dict):
            entries = list(value.items())
        elif isinstance(value, list):
            entries = list(enumerate(value))
        else:
            return value, False
        out: list[tuple[str | int, JsonValue]] = []
        any_hit = False
        for key, item in entries:
            at = (*where, key)
            rule = next((r for r in rules if _names(r, at)), None)
            if rule is not None:
                treated, hit = treat(item, rule, self._hash_key), item is not None
                if found is not None and isinstance(item, str | int | float) and hit:
                    found.append((str(item), str(treated)))
            else:
                treated, hit = self._value(item, rules, at, found)
            out.append((key, treated))
            any_hit = any_hit or hit
        if not any_hit:
            return value, False
        if isinstance(value, dict):
            return {str(key): item for key, item in out}, True
        return [item for _, item in out], True


def _names(rule: MaskingRule, at: tuple[str | int, ...]) -> bool:
    """Whether `rule` names the field at `at` (its key, or its whole path from the top)."""
    if rule.field is not None:
        return isinstance(at[-1], str) and at[-1].lower() == rule.field.lower()
    steps = rule.steps or []
    if len(steps) != len(at):
        return False
    return all(_step_matches(step, part) for step, part in zip(steps, at, strict=True))


def _step_matches(step: PathStep, part: str | int) -> bool:
    if step is None:
        return True
    return step == part and isinstance(step, int) == isinstance(part, int)
