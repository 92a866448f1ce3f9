"""Which adapter serves a model name: the names and prefixes each one claims.

A claim is an exact model name (`echo-1`) or a prefix ending in `*` (`acme/*`). Two
claims clash when some model name would match both, so a plugin can never take a
name from a built-in adapter or another plugin, silently or otherwise. Names no one
claims go to the OpenAI-compatible endpoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# A model name as a claim writes it; `*` only at the end, after at least two characters.
CLAIM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")
MIN_PREFIX = 2

# What the built-in adapters claim. The OpenAI-compatible endpoint also serves every
# name nobody claims; these are the names that are plainly OpenAI's.
BUILTIN_CLAIMS: dict[str, tuple[str, ...]] = {
    "anthropic": ("claude-*", "anthropic/*"),
    "openai": ("gpt-*", "chatgpt-*", "o1*", "o3*", "o4*", "openai/*"),
}


def claim_problem(claim: object) -> str | None:
    """Why `claim` is not a usable claim, or None."""
    if not isinstance(claim, str):
        return f"{claim!r} is not a string"
    stem = claim.removesuffix("*")
    if not CLAIM.match(stem) or (claim.endswith("*") and len(stem) < MIN_PREFIX):
        return (
            f"{claim!r} is not a model name or a prefix ending in '*' (letters, digits and "
            f"._:/@+-; a prefix of at least {MIN_PREFIX} characters)"
        )
    return None


def matches(claim: str, model: str) -> bool:
    if claim.endswith("*"):
        return model.startswith(claim[:-1])
    return model == claim


def overlap(a: str, b: str) -> bool:
    """Whether some model name matches both claims."""
    a_stem, b_stem = a.removesuffix("*"), b.removesuffix("*")
    if a.endswith("*") and b.endswith("*"):
        return a_stem.startswith(b_stem) or b_stem.startswith(a_stem)
    if a.endswith("*"):
        return b_stem.startswith(a_stem)
    if b.endswith("*"):
        return a_stem.startswith(b_stem)
    return a == b


def first_overlap(claim: str, others: Iterable[str]) -> str | None:
    return next((other for other in others if overlap(claim, other)), None)
