"""The scripted model's answers to Keel's routing requests (`keel.activities.router.activities`).

Deterministic, from the request alone, so tests drive every path of the router as a
real provider would drive it:

- text containing `#malformed-route` gets an answer that is not the schema's JSON, and
  text containing `#nul-route` one of the schema's whose reason holds a NUL (`\\u0000`);
- text naming an agent ("the build agent", "use build agent") gets that agent, even
  one that is not listed (a model echoing the user's ask);
- otherwise each listed agent scores the request's words found in its name and
  description: one clear winner is chosen; a tie, or no match at all, is unclear and
  gets a clarifying question.

After a question, the latest answer is what is classified (the user said what they
meant), so a clarified request routes.
"""

from __future__ import annotations

import json
import re

from keel.activities.router.activities import ROUTER_SYSTEM_PROMPT

__all__ = ["MALFORMED_MARK", "NUL_MARK", "asks_for_route", "route_reply"]

MALFORMED_MARK = "#malformed-route"
NUL_MARK = "#nul-route"
_AGENT_LINE = re.compile(r"^- ([a-z][a-z0-9_-]*): (.*)$", re.MULTILINE)
_NAMED = re.compile(r"\b(?:the|use|ask)\s+([a-z][a-z0-9_-]*)\s+agent\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z][a-z0-9]+")
_STOP = {
    "about", "agent", "could", "does", "from", "have", "help", "into", "please", "should",
    "some", "that", "them", "there", "they", "this", "what", "when", "where", "which",
    "with", "would", "your", "something", "thing", "things", "need", "want", "like",
}  # fmt: skip


def asks_for_route(messages: list[object]) -> bool:
    """Whether a chat request is Keel's routing request (by its system prompt)."""
    first = messages[0] if messages else None
    content = first.get("content") if isinstance(first, dict) else None
    return isinstance(content, str) and content.startswith(ROUTER_SYSTEM_PROMPT)


def route_reply(messages: list[object]) -> str:
    """The routing answer's text (JSON, or deliberately not) for a routing request."""
    system = str(messages[0].get("content", "")) if isinstance(messages[0], dict) else ""
    agents = dict(_AGENT_LINE.findall(system))
    user = messages[-1] if messages else {}
    text = str(user.get("content", "")) if isinstance(user, dict) else ""
    answers = text.split("\nThe user answered: ")
    latest = answers[-1] if len(answers) > 1 else text.removeprefix("Request:\n")
    if MALFORMED_MARK in latest:
        return "I would send this to the review agent, I think."
    if NUL_MARK in latest:
        return _answer(agent="review", confidence=0.9, reason="Review\0 fits.")
    named = _NAMED.search(latest)
    if named:
        agent = named.group(1).lower()
        return _answer(agent=agent, confidence=0.95, reason=f"The request names the {agent} agent.")
    words = {_stem(w) for w in _WORD.findall(latest.lower()) if len(w) >= 4 and w not in _STOP}
    scores = {
        name: len(words & {_stem(w) for w in _WORD.findall(f"{name} {description}".lower())})
        for name, description in agents.items()
    }
    best = max(scores.values(), default=0)
    top = sorted(n for n, s in scores.items() if s == best)
    if best > 0 and len(top) == 1:
        return _answer(
            agent=top[0],
            confidence=min(0.95, 0.55 + 0.15 * best),
            reason=f"The request matches what {top[0]} does.",
        )
    if best > 0:
        question = f"Which do you mean: {' or '.join(top)}? Say what you need done."
        return _answer(question=question, reason=f"The request fits {', '.join(top)} alike.")
    question = f"What should be done? I can route to: {', '.join(sorted(agents))}."
    return _answer(question=question, reason="The request does not say what is needed.")


def _answer(
    *,
    agent: str | None = None,
    confidence: float = 0.0,
    reason: str = "",
    question: str | None = None,
) -> str:
    return json.dumps(
        {"agent": agent, "confidence": round(confidence, 2), "reason": reason, "question": question}
    )


def _stem(word: str) -> str:
    """Plural and third-person `s` off, so `reviews` matches `review`."""
    return word[:-1] if len(word) > 4 and word.endswith("s") else word
