"""Text as Postgres can hold it: no text column and no jsonb value takes NUL (`\\u0000`)."""

from __future__ import annotations

import hashlib

__all__ = ["sha256_text", "storable", "storable_json"]


def sha256_text(text: str) -> str:
    """The SHA-256 of a text as stored beside it (messages, facts, decisions)."""
    return hashlib.sha256(text.encode()).hexdigest()


def storable(text: str) -> str:
    """`text` as Postgres can hold it: NUL (which no text column takes) written as `\\x00`.

    Tools escape what they print themselves; this keeps any other text (an MCP server's
    output, a model's reply) from failing the write, and so the activity, for ever.
    """
    return text.replace("\0", "\\x00") if "\0" in text else text


def storable_json(value: object) -> object:
    """`value` with every string (keys too) made `storable`: jsonb refuses `\\u0000` as well."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(str(k)): storable_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable_json(v) for v in value]
    return value
