"""What each masking action makes of one value: pure functions, no keys held here."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from itertools import pairwise

from pydantic import JsonValue

from keel.activities.masking.policy import MaskingRule

__all__ = ["HASH_PREFIX", "MASKED", "bracket", "hashed", "last_n", "masked_digits", "treat"]

HASH_PREFIX = "hash:"
# Hex characters of the HMAC shown: 64 bits, so equal values match and a collision is rare.
HASH_HEX_CHARS = 16
MASKED = "[masked]"
_COUNTRY_CODE = re.compile(r"^\s*(\+\d{1,3})(?=\D|$)")


def hashed(value: JsonValue, key: bytes) -> str:
    """A keyed HMAC-SHA256 of the value's canonical JSON: equal values, equal hashes."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hmac.new(key, canonical.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return HASH_PREFIX + digest.hexdigest()[:HASH_HEX_CHARS]


def last_n(value: JsonValue, keep: int) -> str:
    """All but the last `keep` letters and digits become `*`; separators stay."""
    text = _text(value)
    alnum = sum(ch.isalnum() for ch in text)
    shown = alnum - keep
    out: list[str] = []
    for ch in text:
        if ch.isalnum():
            out.append("*" if shown > 0 else ch)
            shown -= 1
        else:
            out.append(ch)
    return "".join(out)


def bracket(value: JsonValue, bounds: list[float]) -> str:
    """The half-open range of `bounds` a number falls in: `50000-100000`, `<0`, `>=150000`."""
    number = _number(value)
    if number is None:
        return MASKED  # not a number: nothing of it is shown
    if number < bounds[0]:
        return f"<{_shown(bounds[0])}"
    for low, high in pairwise(bounds):
        if low <= number < high:
            return f"{_shown(low)}-{_shown(high)}"
    return f">={_shown(bounds[-1])}"


def masked_digits(value: JsonValue, keep: int) -> str:
    """Every digit becomes `*`, except a leading `+` country code and the last `keep`."""
    text = _text(value)
    code = _COUNTRY_CODE.match(text)
    start = code.end() if code else 0
    digits = sum(ch.isdigit() for ch in text[start:])
    hidden = digits - keep
    out = [text[:start]]
    for ch in text[start:]:
        if ch.isdigit():
            out.append("*" if hidden > 0 else ch)
            hidden -= 1
        else:
            out.append(ch)
    return "".join(out)


def treat(value: JsonValue, rule: MaskingRule, hash_key: bytes) -> JsonValue:
    """The readable copy of one value under `rule`; null stays null (nothing to hide)."""
    if value is None:
        return None
    if rule.action == "hash":
        return hashed(value, hash_key)
    if isinstance(value, dict | list):
        return MASKED  # only `hash` treats a whole object or list; the others show nothing
    if rule.action == "last":
        return last_n(value, rule.keep)
    if rule.action == "bracket":
        return bracket(value, rule.bounds)
    return masked_digits(value, rule.keep_digits)


def _text(value: JsonValue) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _number(value: JsonValue) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value.replace(",", "").replace("_", "").strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _shown(bound: float) -> str:
    return str(int(bound)) if bound.is_integer() else str(bound)
