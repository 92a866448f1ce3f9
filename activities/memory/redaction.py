"""Facts that hold a secret are not remembered.

The audit log's redaction (`activities.store.audit.redact`: bearer tokens, JWTs, `sk-`
keys, AWS key ids, PEM keys, URL passwords) finds the secrets that look like secrets.
A stated fact also names them in words ("my password is hunter2", "the API key:
abc123"), which look like nothing, so a fact that does either is withheld whole: a
memory with a hole where the secret was is of no use, and a partial mask may leak.
"""

from __future__ import annotations

import re

from keel.activities.store.audit import redact

__all__ = ["withhold_secrets"]

# A credential named, then given: "password is x", "password for the db is x",
# "api key: x", "token = x".
_SECRET_STATED = re.compile(
    r"(?i)\b(?:pass(?:word|wd|phrase|code)?|pin|api[ _-]?keys?|access[ _-]?keys?|"
    r"secret(?:[ _-]?keys?)?|tokens?|credentials?|private[ _-]?keys?)"
    r"(?:\s+(?:for|of|to)(?:\s+\S+){1,3}?)?\s*(?:is|are|was|were|:|=|-)\s*\S+"
)
# Long opaque strings mixing letters and digits (`ghp_…`, `xoxb-…`, hex keys): a word
# of no language, at least 20 characters with both.
_OPAQUE = re.compile(r"\b(?=[A-Za-z0-9_\-]*[0-9])(?=[A-Za-z0-9_\-]*[A-Za-z])[A-Za-z0-9_\-]{20,}\b")


def withhold_secrets(text: str) -> str | None:
    """`text` if it may be stored; None if it holds or states a secret."""
    if redact(text) != text:
        return None
    if _SECRET_STATED.search(text) or _OPAQUE.search(text):
        return None
    return text
