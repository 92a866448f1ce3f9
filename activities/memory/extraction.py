"""The model call that proposes facts worth keeping, as a schema-checked JSON answer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "EXTRACTION_MARKER",
    "FACTS_SCHEMA",
    "FactsAnswerInvalid",
    "ProposedFact",
    "ProposedFacts",
    "extraction_messages",
    "parse_facts",
]

FactKind = Literal["preference", "decision", "name", "other"]
MAX_FACTS = 20
MAX_FACT_CHARS = 500
MAX_TRANSCRIPT_CHARS = 24_000

# The system prompt's first line; the scripted model knows an extraction request by it.
EXTRACTION_MARKER = "You extract facts worth remembering about the user."
EXTRACTION_PROMPT = f"""{EXTRACTION_MARKER}
From the conversation below, list what the USER stated that will still matter in a
later conversation: their preferences, decisions they made, names (theirs, their
team's, their projects'), and other lasting facts about them or their work.
- One fact a line, in the third person ("The user prefers tabs for indentation.").
- `kind`: preference, decision, name or other. `topic`: one or two lower-case words
  naming what the fact is about ("indentation", "name"), so a later fact on the same
  topic can replace it.
- Never include passwords, API keys, tokens or other credentials, even if stated.
- Nothing the assistant found out on its own, nothing about this task only.
- No facts: answer {{"facts": []}}.
Answer with JSON only."""

# The JSON schema of the answer, strict (every property required, no others).
FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "maxItems": MAX_FACTS,
            "items": {
                "type": "object",
                "properties": {
                    "fact": {"type": "string", "maxLength": MAX_FACT_CHARS},
                    "kind": {"type": "string", "enum": ["preference", "decision", "name", "other"]},
                    "topic": {"type": "string", "maxLength": 80},
                },
                "required": ["fact", "kind", "topic"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}


class ProposedFact(BaseModel):
    """One fact the model proposes to keep."""

    model_config = ConfigDict(extra="forbid")

    fact: str = Field(min_length=3, max_length=MAX_FACT_CHARS)
    """The fact, one sentence in the third person."""
    kind: FactKind
    """What sort of fact it is."""
    topic: str = Field(default="", max_length=80)
    """What it is about, in a word or two: a later fact on the same topic replaces it."""


class ProposedFacts(BaseModel):
    """The model's whole answer."""

    model_config = ConfigDict(extra="forbid")

    facts: list[ProposedFact] = Field(default_factory=list, max_length=MAX_FACTS)


class FactsAnswerInvalid(ValueError):
    """The model's answer is not the JSON the schema asks for; asking again may help."""


def parse_facts(content: str | None) -> ProposedFacts:
    """The answer checked against the schema, or `FactsAnswerInvalid` saying why not."""
    text = (content or "").strip()
    if text.startswith("```"):  # some models fence JSON even when asked not to
        text = text.strip("`").removeprefix("json").strip()
    try:
        return ProposedFacts.model_validate_json(text)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"]) or "answer"
        raise FactsAnswerInvalid(
            f"the facts answer does not match its schema at {where}: {problem['msg']}"
        ) from exc


def extraction_messages(user_texts: list[str], report: str | None) -> list[dict[str, str]]:
    """The request: the instructions, then what the user said and what the agent answered."""
    lines = [f"USER: {text}" for text in user_texts if text.strip()]
    if report:
        lines.append(f"ASSISTANT: {report}")
    transcript = "\n\n".join(lines)
    if len(transcript) > MAX_TRANSCRIPT_CHARS:
        # The user's words come first; an overlong report loses its end.
        transcript = transcript[:MAX_TRANSCRIPT_CHARS]
    return [
        {"role": "system", "content": EXTRACTION_PROMPT},
        {"role": "user", "content": transcript},
    ]


def response_format() -> dict[str, Any]:
    """`response_format` of the request: JSON that the schema checks (structured outputs)."""
    return {
        "type": "json_schema",
        "json_schema": {"name": "remembered_facts", "strict": True, "schema": FACTS_SCHEMA},
    }
