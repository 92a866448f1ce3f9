"""The scripted model server's answers for agent memory, decided from the request alone.

- `POST /v1/embeddings`: a hashed bag of words, normalised (`EMBEDDING_DIMENSIONS`
  floats): texts that share words point the same way, unrelated ones are near
  orthogonal, and the same text always gets the same vector. A model whose name
  starts with `missing` is refused as OpenAI refuses an unknown model (404).
- A chat request whose system prompt is memory's extraction prompt: the facts the
  user's lines state, found by phrase ("I prefer ...", "my name is ...", "we decided
  ...", "remember that ..."), as the JSON the schema asks for. It proposes what it
  finds, secrets included, as a careless model would, so Keel's redaction is tested.
  A model whose name starts with `plain` refuses `response_format` (HTTP 400), as
  servers without structured outputs do.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from keel.activities.memory.dedupe import content_words
from keel.activities.memory.extraction import EXTRACTION_MARKER

__all__ = ["EMBEDDING_DIMENSIONS", "asks_for_facts", "embed", "embeddings", "facts_reply"]

EMBEDDING_DIMENSIONS = 256

_PHRASES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"(?i)\bmy name is ([^.!?\n]+)"), "name", "The user's name is {}."),
    (re.compile(r"(?i)\bi prefer ([^.!?\n]+)"), "preference", "The user prefers {}."),
    (re.compile(r"(?i)\bwe decided (?:to |that )?([^.!?\n]+)"), "decision", "The user decided {}."),
    (re.compile(r"(?i)\bremember that ([^.!?\n]+)"), "other", "{}."),
)


def embed(text: str) -> list[float]:
    """The text's hashed bag of words, unit length (all zeros for a text of no words)."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for word in content_words(text):
        digest = hashlib.sha256(word.encode()).digest()
        bucket = int.from_bytes(digest[:4], "big") % EMBEDDING_DIMENSIONS
        vector[bucket] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


async def embeddings(request: Request) -> JSONResponse:
    """OpenAI's `POST /v1/embeddings`, floats or base64 as `encoding_format` asks."""
    try:
        body = await request.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or "input" not in body:
        return _error("The request needs an `input` string or list of strings.", "input")
    model = str(body.get("model") or "scripted-embeddings")
    if model.startswith("missing"):
        error = {
            "message": f"The model `{model}` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
        return JSONResponse({"error": error}, status_code=404)
    texts = body["input"]
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return _error("`input` must be a string or a list of strings.", "input")
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for index, text in enumerate(texts):
        vector = embed(text)
        value: object = (
            base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
            if as_base64
            else vector
        )
        data.append({"object": "embedding", "index": index, "embedding": value})
    tokens = sum(len(t.split()) for t in texts)
    return JSONResponse(
        {
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


def refuses_schema(body: dict[str, Any]) -> JSONResponse | None:
    """A `plain…` model's refusal of a request with `response_format`; None otherwise."""
    if str(body.get("model") or "").startswith("plain") and "response_format" in body:
        return _error("response_format is not supported by this model.", "response_format")
    return None


def asks_for_facts(messages: list[object]) -> bool:
    """Whether a chat request is memory's extraction call."""
    first = messages[0] if messages else None
    return (
        isinstance(first, dict)
        and first.get("role") == "system"
        and str(first.get("content") or "").startswith(EXTRACTION_MARKER)
    )


def facts_reply(messages: list[object]) -> str:
    """The facts the user's lines state, as the extraction schema's JSON."""
    facts: list[dict[str, str]] = []
    for line in _user_lines(messages[1:]):
        for pattern, kind, template in _PHRASES:
            for match in pattern.finditer(line):
                stated = match.group(1).strip()
                words = sorted(content_words(stated))
                topic = "name" if kind == "name" else _last_word(stated, words)
                facts.append({"fact": template.format(stated), "kind": kind, "topic": topic})
    return json.dumps({"facts": facts})


def _user_lines(messages: list[object]) -> list[str]:
    """The transcript's lines the user wrote: from `USER: ` up to the next speaker."""
    lines: list[str] = []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        speaker = ""
        for line in str(message.get("content") or "").splitlines():
            for name in ("USER", "ASSISTANT"):
                if line.startswith(f"{name}: "):
                    speaker, line = name, line.removeprefix(f"{name}: ")
            if speaker == "USER":
                lines.append(line)
    return lines


def _last_word(stated: str, words: list[str]) -> str:
    """The topic of a stated fact: its last content word ("tabs for indentation")."""
    found = [w for w in re.findall(r"[a-z0-9]+", stated.lower()) if w in words]
    return found[-1] if found else ""


def _error(message: str, param: str) -> JSONResponse:
    error: dict[str, Any] = {
        "message": message,
        "type": "invalid_request_error",
        "param": param,
        "code": None,
    }
    return JSONResponse({"error": error}, status_code=400)
