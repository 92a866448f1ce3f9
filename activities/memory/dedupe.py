"""Where a proposed fact goes among a user's memories: nowhere (a duplicate), over a
similar one (an update), or in a row of its own. Pure code, so it is tested alone."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "COSINE_SIMILAR",
    "WORDS_SIMILAR",
    "Candidate",
    "KnownMemory",
    "Placement",
    "content_words",
    "fact_hash",
    "normalise",
    "place",
]

# Two facts this close are one fact restated (a changed preference, a corrected name):
# the newer one replaces the older. Embeddings of paraphrases sit well above 0.9; word
# sets are coarser, so they must share three quarters of their content words.
COSINE_SIMILAR = 0.9
WORDS_SIMILAR = 0.75

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STOP_WORDS = frozenset(
    "a an and are as at be by do does for from has have i in is it its me my of on or our"
    " that the their them they this to was we were will with you your user user's users"
    " prefers prefer decided".split()
)


def normalise(fact: str) -> str:
    """The fact as compared: lower case, single spaces, no closing punctuation."""
    return " ".join(fact.lower().split()).rstrip(" .!;")


def fact_hash(fact: str) -> str:
    """SHA-256 of the normalised fact: equal for the same fact however it is spaced."""
    return hashlib.sha256(normalise(fact).encode()).hexdigest()


def content_words(text: str) -> frozenset[str]:
    """The words that say what a fact is about (no stop words, crude plural folding)."""
    words = set()
    for word in _WORD.findall(text.lower()):
        word = word.removesuffix("'s")
        if word in _STOP_WORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.add(word)
    return frozenset(words)


@dataclass(frozen=True)
class KnownMemory:
    """A memory already stored for the user, as much of it as placing needs."""

    id: str
    fact: str
    kind: str
    topic: str = ""
    embedding: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Candidate:
    """A fact the model proposed, already checked for secrets."""

    fact: str
    kind: str
    topic: str = ""
    embedding: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Placement:
    """What to do with a candidate; `memory_id` names the memory it repeats or updates."""

    action: Literal["duplicate", "update", "insert"]
    memory_id: str | None = None
    similarity: float = 0.0


def place(candidate: Candidate, known: Sequence[KnownMemory]) -> Placement:
    """The same fact is a duplicate; one on the same topic, or close enough, is updated.

    The model names a fact's topic ("indentation", "name"), which says best that two
    facts are about one thing; without a shared topic, embeddings (where both have one
    of the same size) or shared content words decide.
    """
    digest = fact_hash(candidate.fact)
    for memory in known:
        if fact_hash(memory.fact) == digest:
            return Placement("duplicate", memory.id, 1.0)
    topic = normalise(candidate.topic)
    if topic:
        for memory in known:
            if memory.kind == candidate.kind and normalise(memory.topic) == topic:
                return Placement("update", memory.id, similarity(candidate, memory))
    best: KnownMemory | None = None
    best_score = 0.0
    for memory in known:
        score = similarity(candidate, memory)
        if score > best_score:
            best, best_score = memory, score
    if best is not None and best_score >= _threshold(candidate, best):
        return Placement("update", best.id, best_score)
    return Placement("insert")


def similarity(candidate: Candidate, memory: KnownMemory) -> float:
    """Cosine of the embeddings when both have one of one size, else word overlap."""
    a, b = candidate.embedding, memory.embedding
    if a is not None and b is not None and len(a) == len(b):
        return cosine(a, b)
    return jaccard(content_words(candidate.fact), content_words(memory.fact))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def _threshold(candidate: Candidate, memory: KnownMemory) -> float:
    a, b = candidate.embedding, memory.embedding
    return COSINE_SIMILAR if a is not None and b is not None and len(a) == len(b) else WORDS_SIMILAR
