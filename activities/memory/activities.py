"""Memory's activities: recall before a run's first model call, facts after its end.

Recall finds the user's memories relevant to the run's input (pgvector where the
database has it, full-text search where not) and stores them as a system note in the
run's conversation, with where each came from, so the LLM activity sends it like any
other message and the history carries only a count. Extraction asks the run's model
for facts worth keeping (a schema-checked JSON answer), withholds those that hold a
secret, places the rest among the user's memories (duplicate, update or new) and
stores them, audited, in one transaction with a record of the extraction, so a
retried attempt answers from that record instead of asking again.
"""

from __future__ import annotations

import base64
import logging
import struct
from collections.abc import Sequence
from typing import Any

import openai
from temporalio import activity
from temporalio.exceptions import ApplicationError

from keel.activities.llm.limits import ProviderLimiter
from keel.activities.llm.prices import ModelPrice
from keel.activities.llm.providers.anthropic_messages import AnthropicMessages
from keel.activities.llm.providers.one_shot import OneShotModel
from keel.activities.llm.providers.retry_status import status_is_retryable
from keel.activities.memory.dedupe import Candidate, KnownMemory, place
from keel.activities.memory.extraction import (
    FactsAnswerInvalid,
    extraction_messages,
    parse_facts,
    response_format,
)
from keel.activities.memory.redaction import withhold_secrets
from keel.activities.plugin_api import PluginCode
from keel.activities.run_records import open_run
from keel.activities.store.memory_store import ExtractionCounts, Memory, MemoryStore, StoredFact
from keel.activities.store.run_store import Store
from keel.workflows.activity_refs import AgentMemory
from keel.workflows.error_types import LLM_UNAVAILABLE
from keel.workflows.memory.models import RecallInput, RecallResult, RememberInput, RememberResult

log = logging.getLogger("keel.memory")

# Fewer than this cosine similarity: not about the same thing (unrelated texts sit near 0).
MIN_RECALL_SIMILARITY = 0.2
# What of a run's input recall searches with: its opening says what it is about, and an
# embeddings model takes a few thousand tokens at most.
RECALL_QUERY_CHARS = 4_000

NOTE_HEAD = (
    "Memories of this user from their earlier conversations (facts they stated; each "
    "says where it came from). Use them where they help; what the user says now wins "
    "over them."
)


class EmbeddingsUnavailable(RuntimeError):
    """The embeddings endpoint refused the request; full-text search stands in."""


class Embedder:
    """Embeddings from an OpenAI-compatible `POST /v1/embeddings`."""

    def __init__(self, client: openai.AsyncOpenAI, model: str) -> None:
        self._client = client
        self.model = model

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        try:
            response = await self._client.embeddings.create(
                model=self.model, input=list(texts), encoding_format="float"
            )
        except openai.APIStatusError as exc:
            if status_is_retryable(exc.status_code):
                raise ApplicationError(
                    f"Embeddings endpoint answered {exc.status_code}", type=LLM_UNAVAILABLE
                ) from exc
            raise EmbeddingsUnavailable(
                f"the embeddings endpoint refused model {self.model} ({exc.status_code})"
            ) from exc
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise ApplicationError(
                f"Embeddings endpoint unreachable: {exc}", type=LLM_UNAVAILABLE
            ) from exc
        ordered = sorted(response.data, key=lambda d: d.index)
        return [_floats(d.embedding) for d in ordered]


class MemoryActivities(AgentMemory):
    """`recall_memories` and `remember_facts`, per tenant and user."""

    def __init__(
        self,
        store: Store,
        memories: MemoryStore,
        client: openai.AsyncOpenAI,
        *,
        embedding_model: str,
        extraction_model: str | None = None,
        recall_limit: int = 8,
        prices: dict[str, ModelPrice] | None = None,
        anthropic: AnthropicMessages | None = None,
        plugins: PluginCode | None = None,
        limits: ProviderLimiter | None = None,
    ) -> None:
        self._store = store
        self._memories = memories
        self._model = OneShotModel(client, anthropic, plugins, limits)
        self._embedder = Embedder(client, embedding_model)
        self._extraction_model = extraction_model
        self._recall_limit = recall_limit
        self._prices = prices or {}

    @activity.defn(name="recall_memories")
    async def recall_memories(self, request: RecallInput) -> RecallResult:
        if request.start is not None:
            await open_run(self._store, request.start)
        opening = await self._store.get_message(request.run_id, 0, 1)
        query = (opening.content or "")[:RECALL_QUERY_CHARS] if opening is not None else ""
        found = await self._search(request.tenant_id, request.user_id, query)
        # The event is written even when nothing is found: the run's seqs have no gaps.
        event: dict[str, object] = {
            "action": "recalled",
            "count": len(found),
            "memories": [
                {
                    "id": m.id,
                    "source_run_id": m.source_run_id,
                    "source_session_id": m.source_session_id,
                    "updated_at": m.updated_at.isoformat(),
                }
                for m in found
            ],
        }
        await self._memories.put_recall_note(
            request.run_id, recall_note(found) if found else None, request.event_seq, event
        )
        return RecallResult(count=len(found))

    async def _search(self, tenant_id: str, user_id: str, query: str) -> list[Memory]:
        if not query.strip():
            return []
        limit = self._recall_limit
        if await self._memories.mode() == "vector":
            try:
                [embedding] = await self._embedder.embed([query])
            except EmbeddingsUnavailable as exc:
                log.warning("memory recall falls back to full-text search: %s", exc)
            else:
                found = await self._memories.search_vector(
                    tenant_id, user_id, embedding, self._embedder.model, limit
                )
                return [m for m in found if (m.score or 0.0) >= MIN_RECALL_SIMILARITY]
        return await self._memories.search_text(tenant_id, user_id, query, limit)

    @activity.defn(name="remember_facts")
    async def remember_facts(self, request: RememberInput) -> RememberResult:
        done = await self._memories.extraction(request.run_id)
        if done is not None:  # an earlier attempt stored them; only its result was lost
            return RememberResult(**done.model_dump(exclude={"earlier"}))
        user_texts, report = await self._transcript(request.run_id)
        model = self._extraction_model or request.model
        content, tokens = await self._ask(
            model, extraction_messages(user_texts, report), request.run_id
        )
        try:
            proposed = parse_facts(content)
        except FactsAnswerInvalid as exc:
            raise ApplicationError(
                f"The model's facts answer was not valid: {exc}", type="MemoryAnswerInvalid"
            ) from exc
        kept: list[Candidate] = []
        withheld = 0
        for fact in proposed.facts:
            text = withhold_secrets(" ".join(fact.fact.split()))
            topic = withhold_secrets(fact.topic.strip().lower()) if fact.topic else ""
            if text is None or topic is None:
                withheld += 1
                continue
            kept.append(Candidate(fact=text, kind=fact.kind, topic=topic))
        counts = ExtractionCounts(proposed=len(proposed.facts), withheld=withheld)
        embedding_model: str | None = None
        if kept and await self._memories.mode() == "vector":
            try:
                vectors = await self._embedder.embed([c.fact for c in kept])
            except EmbeddingsUnavailable as exc:
                log.warning("memories are stored without embeddings: %s", exc)
            else:
                embedding_model = self._embedder.model
                kept = [
                    Candidate(c.fact, c.kind, c.topic, tuple(v))
                    for c, v in zip(kept, vectors, strict=True)
                ]
        known = await self._memories.known(request.tenant_id, request.user_id, embedding_model)
        facts = placed(kept, known)
        stored = await self._memories.store_facts(
            tenant_id=request.tenant_id,
            user_id=request.user_id,
            run_id=request.run_id,
            session_id=request.session_id,
            facts=facts,
            embedding_model=embedding_model,
            counts=counts,
            tokens=tokens,
            cost_usd=self._cost(model, tokens),
        )
        # An overlapping attempt recorded first: its usage is the run's, this one's is not.
        spent = [] if stored.earlier else tokens
        return RememberResult(
            **stored.model_dump(exclude={"earlier"}),
            tokens=spent,
            cost_usd=self._cost(model, spent),
        )

    def _cost(self, model: str, tokens: Sequence[int]) -> float:
        price = self._prices.get(model)
        return price.cost(tokens[0], tokens[1]) if price and tokens else 0.0

    async def _transcript(self, run_id: str) -> tuple[list[str], str | None]:
        """What the user said in this run (its input), and the agent's final answer."""
        messages = await self._store.conversation(run_id, None)
        user_texts = [m.content or "" for m in messages if m.step == 0 and m.role == "user"]
        answers = [m for m in messages if m.role == "assistant" and m.content]
        return user_texts, answers[-1].content if answers else None

    async def _ask(
        self, model: str, messages: list[dict[str, str]], run_id: str
    ) -> tuple[str, list[int]]:
        reply = await self._model.complete(
            model,
            [dict(m) for m in messages],
            purpose="the memory extraction",
            run_id=run_id,
            response_format=response_format(),
        )
        return reply.text, list(reply.tokens)


def placed(candidates: Sequence[Candidate], known: Sequence[KnownMemory]) -> list[StoredFact]:
    """Each candidate placed among the known memories and the candidates before it."""
    seen = list(known)
    facts: list[StoredFact] = []
    for index, candidate in enumerate(candidates):
        where = place(candidate, seen)
        embedding = list(candidate.embedding) if candidate.embedding is not None else None
        if where.action == "duplicate":
            if where.memory_id is not None and not where.memory_id.startswith("new-"):
                facts.append(
                    StoredFact(
                        fact=candidate.fact,
                        kind=candidate.kind,
                        topic=candidate.topic,
                        duplicate_of=where.memory_id,
                    )
                )
            continue
        replaces = where.memory_id if where.action == "update" else None
        if replaces is not None and replaces.startswith("new-"):
            # Similar to a fact of this same answer: the first one stands.
            continue
        facts.append(
            StoredFact(
                fact=candidate.fact,
                kind=candidate.kind,
                topic=candidate.topic,
                replaces=replaces,
                embedding=embedding,
            )
        )
        seen = [m for m in seen if m.id != replaces]
        seen.append(
            KnownMemory(
                id=f"new-{index}",
                fact=candidate.fact,
                kind=candidate.kind,
                topic=candidate.topic,
                embedding=candidate.embedding,
            )
        )
    return facts


def recall_note(found: Sequence[Memory]) -> str:
    """The system note the model gets: each memory with its id, source and date."""
    lines = [NOTE_HEAD]
    for memory in found:
        source = f"run {memory.source_run_id}"
        if memory.source_session_id:
            source = f"session {memory.source_session_id}, {source}"
        lines.append(
            f"- [{memory.id}] {memory.fact} ({source}, {memory.updated_at.date().isoformat()})"
        )
    return "\n".join(lines)


def _floats(embedding: Any) -> list[float]:
    """An embedding as floats, whether the server sent a list or base64 float32s."""
    if isinstance(embedding, str):
        raw = base64.b64decode(embedding)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    return [float(x) for x in embedding]
