"""The Postgres store: runs, messages, events and LLM call traces.

Every write is idempotent on its natural key — `(run_id, step, ord)` for
messages, `(run_id, seq)` for events, `(run_id, step)` for LLM calls — so a
retried activity changes nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from importlib import resources
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic import JsonValue

from keel.activities.store.audit import AuditEntry, AuditLog, redact
from keel.activities.store.coverage_store import RECORD_VIEW_SQL, FileView
from keel.activities.store.findings_store import FindingsLedger
from keel.activities.store.interaction_closing import close_pending_in
from keel.activities.store.interaction_rows import event_data
from keel.activities.store.postgres_text import storable, storable_json
from keel.activities.store.records import (
    EventRecord,
    MessageRecord,
    NewRun,
    RecordedCall,
    RunRecord,
)
from keel.activities.store.run_tree import WAITS_ON_SOMEONE
from keel.workflows.run.models import StartRunInput

# Any fixed number works; it serialises concurrent migrators (API and worker).
MIGRATION_LOCK_ID = 7_411_203
# A model is taken to be fast when its latest calls, and at least a few, all were.
FAST_MODEL_SAMPLE = 10
FAST_MODEL_MIN_CALLS = 3


# The one statement that creates a run's row, whoever records the run first: the API
# (before it starts the workflow) or the run's own start (a schedule's run, a child's).
INSERT_QUEUED_RUN_SQL = (
    "INSERT INTO runs (id, tenant_id, session_id, agent, model, requester, trigger,"
    " parent_run_id, workspace, input, status, metadata, request_hash, schedule_id)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'queued', %s, %s, %s)"
    " ON CONFLICT (id) DO NOTHING"
)
# A queued run starts once: a retried start finds it running and changes nothing.
MARK_RUN_STARTED_SQL = (
    "UPDATE runs SET status = 'running', started_at = coalesce(started_at, now())"
    " WHERE id = %s AND status = 'queued'"
)
# Storing texts again marks them used now, so retention keeps texts a recent run uses.
INSERT_RUN_TEXTS_SQL = (
    "INSERT INTO run_texts (tenant_id, key, system_prompt, input)"
    " VALUES (%s, %s, %s, %s) ON CONFLICT (tenant_id, key) DO UPDATE SET created_at = now()"
)

# How long a caller waits for a pooled connection, and a new one for Postgres to answer.
POOL_WAIT_S = 5.0
CONNECT_TIMEOUT_S = 5


COVERAGE_SECTION_SQL = "SELECT coverage->>'section' AS section FROM runs WHERE id = %s"


class StoreUnavailable(RuntimeError):
    """Postgres could not be reached; retrying later may help."""


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def texts_key(system_prompt: str, input: str) -> str:
    """Content address of a run's texts: the same texts always get the same key."""
    return sha256_text(json.dumps([system_prompt, input]))


async def _insert_queued(conn: AsyncConnection[dict[str, Any]], run: NewRun) -> bool:
    """Write a run's row, queued; False if a run with its id is there already."""
    cur = await conn.execute(
        INSERT_QUEUED_RUN_SQL,
        (
            run.run_id,
            run.tenant_id,
            run.session_id,
            run.agent,
            run.model,
            run.requester,
            run.trigger,
            run.parent_run_id,
            run.workspace,
            run.input,
            Jsonb(run.metadata),
            run.request_hash,
            run.schedule_id,
        ),
    )
    return cur.rowcount == 1


def run_started_entry(start: StartRunInput) -> AuditEntry:
    """What the audit log keeps of a run's start, whichever surface asked for it."""
    detail: dict[str, JsonValue] = {
        "agent": start.agent,
        "model": start.model,
        "trigger": start.trigger,
        "session_id": start.session_id,
        "parent_run_id": start.parent_run_id,
        "schedule_id": start.schedule_id,
    }
    return AuditEntry(
        tenant_id=start.tenant_id,
        actor=start.requester.removeprefix("user:"),
        category="run",
        action="run.started",
        subject=start.run_id,
        detail=detail,
    )


class MissingRunTexts(LookupError):
    """A run's input points at texts that are not stored (for its tenant)."""


RECORD_LLM_CALL_SQL = (
    "WITH call AS (INSERT INTO llm_calls (run_id, step, model, prompt_tokens,"
    " completion_tokens, latency_ms, attempt, finish_reason, cost_usd, estimated_tokens)"
    " VALUES (%(run)s, %(step)s, %(model)s, %(prompt)s, %(completion)s,"
    " %(latency)s, %(attempt)s, %(finish)s, %(cost)s, %(estimated)s)"
    " ON CONFLICT DO NOTHING RETURNING 1)"
    " UPDATE runs SET prompt_tokens = prompt_tokens + %(prompt)s,"
    " completion_tokens = completion_tokens + %(completion)s,"
    " steps = greatest(steps, %(step)s), cost_usd = cost_usd + %(cost)s"
    " WHERE id = %(run)s AND EXISTS (SELECT 1 FROM call)"
)
"""A model call's trace; its usage counts on the run once per step, however often the
step's call is recorded (a retried activity records it again), and the run's `steps`
reach the call's step. The router's classification is recorded by it too, one step a
round, so a router run's steps count its rounds while it routes."""


class Store:
    """Async access to Keel's tables through a connection pool."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        wait_s: float = POOL_WAIT_S,
    ) -> Store:
        """A pool that fails fast while Postgres is away and heals when it is back.

        A caller waits at most `wait_s` for a connection, so an outage is an error in
        seconds (the API answers 503, activities are retried) rather than a hang. A
        connection the outage broke fails its next use once and is replaced (checking
        each one as it is handed out would cost a round trip on every statement).
        """
        pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]] = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            timeout=wait_s,
            # Give up on a lost connection at once; the next caller connects anew.
            reconnect_timeout=0,
            kwargs={
                "row_factory": dict_row,
                "autocommit": True,
                "connect_timeout": CONNECT_TIMEOUT_S,
            },
        )
        try:
            await pool.open(wait=True, timeout=20)
        except Exception as exc:
            await pool.close()
            raise StoreUnavailable(
                f"Cannot connect to Postgres ({exc}). Check DATABASE_URL or unset it to use "
                "the embedded database."
            ) from exc
        return cls(pool)

    async def close(self) -> None:
        await self._pool.close()

    async def ping(self) -> None:
        """One round trip to Postgres; raises while it is away."""
        async with self._pool.connection() as conn:
            await conn.execute("SELECT 1")

    @property
    def pool(self) -> AsyncConnectionPool[AsyncConnection[dict[str, Any]]]:
        """The shared pool, for the other stores (interactions, audit) to use."""
        return self._pool

    async def put_event(self, run_id: str, seq: int, type_: str, data: dict[str, object]) -> None:
        async with self._pool.connection() as conn:
            await self._put_event(conn, run_id, seq, type_, data)

    async def notify(self, channel: str, payload: str) -> None:
        """Send a NOTIFY at once (outside any transaction); payloads must stay under 8000 bytes."""
        async with self._pool.connection() as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))

    # -- schema -----------------------------------------------------------

    async def migrate(self) -> list[str]:
        """Apply numbered SQL files not yet applied; returns the names applied."""
        files = sorted(
            (
                f
                for f in resources.files("keel.activities.store.migrations").iterdir()
                if f.name.endswith(".sql")
            ),
            key=lambda f: f.name,
        )
        numbers = [int(f.name.split("_", 1)[0]) for f in files]
        doubled = sorted({n for n in numbers if numbers.count(n) > 1})
        if doubled:
            # Two branches that each added "the next" migration: renumber one of them.
            raise RuntimeError(
                f"Migrations share a number: {', '.join(f'{n:03d}' for n in doubled)}; "
                "give each SQL file in activities/store/migrations its own number."
            )
        applied: list[str] = []
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_ID,))
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            cur = await conn.execute("SELECT version FROM schema_migrations")
            done = {row["version"] for row in await cur.fetchall()}
            for file in files:
                version = int(file.name.split("_", 1)[0])
                if version in done:
                    continue
                await conn.execute(file.read_text())  # type: ignore[arg-type]
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (version, file.name),
                )
                applied.append(file.name)
        return applied

    # -- runs -------------------------------------------------------------

    async def create_run(self, run: NewRun) -> bool:
        """Record a queued run, and its texts, in one transaction; False if a run with this
        id already exists (then nothing is written)."""
        async with self._pool.connection() as conn, conn.transaction():
            if not await _insert_queued(conn, run):
                return False
            if run.system_prompt is not None:
                await conn.execute(
                    INSERT_RUN_TEXTS_SQL,
                    (
                        run.tenant_id,
                        texts_key(run.system_prompt, run.input),
                        run.system_prompt,
                        run.input,
                    ),
                )
            return True

    async def forget_unstarted_run(self, run_id: str) -> None:
        """Remove a queued run whose workflow could not be started, so none is left that
        says it is waiting to run; a workflow that did start records its run again."""
        async with self._pool.connection() as conn:
            await conn.execute(
                "DELETE FROM runs WHERE id = %s AND status = 'queued' AND started_at IS NULL"
                " AND NOT EXISTS (SELECT 1 FROM events WHERE run_id = %s)",
                (run_id, run_id),
            )

    async def put_run_texts(self, tenant_id: str, system_prompt: str, input: str) -> str:
        """Store a run's system prompt and input; returns the key a `RunInput` carries."""
        key = texts_key(system_prompt, input)
        async with self._pool.connection() as conn:
            await conn.execute(INSERT_RUN_TEXTS_SQL, (tenant_id, key, system_prompt, input))
        return key

    async def run_texts(self, tenant_id: str, key: str) -> tuple[str, str] | None:
        """The system prompt and input stored under `key` for the tenant, if any."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT system_prompt, input FROM run_texts WHERE tenant_id = %s AND key = %s",
                (tenant_id, key),
            )
            row = await cur.fetchone()
        return (row["system_prompt"], row["input"]) if row else None

    async def model_is_fast(self, model: str, below_ms: int) -> bool:
        """Whether the model's latest calls (at least a few) all took under `below_ms`."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT count(*) AS calls, max(latency_ms) AS slowest FROM ("
                " SELECT latency_ms FROM llm_calls WHERE model = %s"
                " ORDER BY created_at DESC LIMIT %s) latest",
                (model, FAST_MODEL_SAMPLE),
            )
            row = await cur.fetchone()
        if row is None or row["calls"] < FAST_MODEL_MIN_CALLS:
            return False
        return bool(row["slowest"] < below_ms)

    async def start_run(self, start: StartRunInput) -> None:
        """Mark the run running and store its opening messages and event."""
        if start.texts_key is not None:
            texts = await self.run_texts(start.tenant_id, start.texts_key)
            if texts is None:
                raise MissingRunTexts(
                    f"Run {start.run_id}: no stored prompt and input under {start.texts_key} "
                    f"for tenant {start.tenant_id}."
                )
            start = start.model_copy(update={"system_prompt": texts[0], "input": texts[1]})
        async with self._pool.connection() as conn, conn.transaction():
            # A run the API queued has its row; a schedule's run gets it here, the same way.
            await _insert_queued(
                conn,
                NewRun(
                    run_id=start.run_id,
                    tenant_id=start.tenant_id,
                    agent=start.agent,
                    model=start.model,
                    requester=start.requester,
                    trigger=start.trigger,
                    workspace=start.workspace,
                    input=start.input,
                    session_id=start.session_id,
                    parent_run_id=start.parent_run_id,
                    schedule_id=start.schedule_id,
                ),
            )
            cur = await conn.execute(MARK_RUN_STARTED_SQL, (start.run_id,))
            await self._put_message(conn, start.run_id, 0, 0, "system", start.system_prompt)
            await self._put_message(conn, start.run_id, 0, 1, "user", start.input)
            started: dict[str, object] = {
                "agent": start.agent,
                "model": start.model,
                "trigger": start.trigger,
                "input": start.input,
            }
            if start.schedule_id:
                started["schedule_id"] = start.schedule_id
            await self._put_event(conn, start.run_id, start.event_seq, "run_started", started)
            if cur.rowcount == 1:  # this attempt started it: a retried one audits nothing
                if start.texts_key is None:
                    # Texts that came inline (a schedule's, a child's) are kept as every
                    # run's are, so each run's texts can be found the same way.
                    key = texts_key(start.system_prompt, start.input)
                    await conn.execute(
                        INSERT_RUN_TEXTS_SQL,
                        (start.tenant_id, key, start.system_prompt, start.input),
                    )
                await AuditLog.append_in(conn, run_started_entry(start))

    async def finish_run(
        self,
        *,
        run_id: str,
        status: str,
        stop_reason: str,
        error: str | None,
        final_step: int | None,
        steps: int,
        tool_calls: int,
        event_seq: int,
        event_type: str,
    ) -> str:
        """Record the outcome; returns the report (the final assistant message)."""
        async with self._pool.connection() as conn, conn.transaction():
            report = ""
            if final_step is not None:
                cur = await conn.execute(
                    "SELECT content FROM messages WHERE run_id = %s AND step = %s AND ord = 1",
                    (run_id, final_step),
                )
                row = await cur.fetchone()
                report = (row["content"] if row else "") or ""
                if not report.strip():
                    report = f"The run stopped ({stop_reason}) before the model wrote an answer."
            settled = await FindingsLedger.settle_in(
                conn, run_id, report=report, final_step=final_step
            )
            report, found = settled.report, settled.record
            if final_step is not None:
                # Keel's own account of what was read follows the model's text and findings.
                cur = await conn.execute(COVERAGE_SECTION_SQL, (run_id,))
                row = await cur.fetchone()
                if row is not None and row["section"]:
                    report = f"{report.rstrip()}\n\n{row['section']}"
            await conn.execute(
                "UPDATE runs SET status = %s, stop_reason = %s, error = %s,"
                " report = coalesce(%s, report), steps = %s, tool_calls = %s,"
                " findings = coalesce(%s, findings),"
                " finished_at = coalesce(finished_at, now()) WHERE id = %s",
                (
                    status,
                    stop_reason,
                    error,
                    report or None,
                    steps,
                    tool_calls,
                    Jsonb(found.model_dump(mode="json")) if found is not None else None,
                    run_id,
                ),
            )
            # What it still waited on ends with it, in the same transaction, each told
            # as resolved before the run's end. The end is the run's last event, so the
            # seqs after the one the workflow gave it are free. A retry closes nothing
            # again, and its end finds its seq taken: nothing is written twice.
            closed = await close_pending_in(
                conn, run_id, run_status=status, stop_reason=stop_reason
            )
            for offset, ia in enumerate(closed):
                await self._put_event(
                    conn, run_id, event_seq + offset, "interaction_resolved", event_data(ia)
                )
            data: dict[str, object] = {"status": status, "stop_reason": stop_reason}
            if error:
                data["error"] = error
            await self._put_event(conn, run_id, event_seq + len(closed), event_type, data)
        return report

    async def end_closed_elsewhere(self, run_id: str, *, status: str, error: str) -> bool:
        """Record the end of a run whose workflow closed without saying so (terminated or
        timed out in Temporal): its row and what it waited on. False if already recorded."""
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "UPDATE runs SET status = %s, stop_reason = %s, error = coalesce(error, %s),"
                " finished_at = coalesce(finished_at, now())"
                " WHERE id = %s AND status NOT IN ('completed', 'failed', 'cancelled')",
                (status, "error" if status == "failed" else "cancelled", error, run_id),
            )
            if cur.rowcount == 0:
                return False
            await close_pending_in(conn, run_id, run_status=status, stop_reason="closed_elsewhere")
            return True

    async def get_run(self, run_id: str) -> RunRecord | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute("SELECT * FROM runs WHERE id = %s", (run_id,))
            row = await cur.fetchone()
        return RunRecord.model_validate(row) if row else None

    async def list_runs(
        self,
        *,
        tenant_id: str,
        limit: int = 50,
        before: tuple[datetime, str] | None = None,
        status: str | None = None,
        agent: str | None = None,
        session_id: str | None = None,
        statuses: list[str] | None = None,
        schedule_id: str | None = None,
        trigger: str | None = None,
        parent_run_id: str | None = None,
        top_level: bool = False,
        waiting: bool | None = None,
    ) -> list[RunRecord]:
        """Newest first; `before` is the (created_at, id) of the last row already seen.
        `top_level` leaves sub-agent runs out; `parent_run_id` lists one run's children;
        `waiting` keeps only the runs that wait on a person (True) or those that do not."""
        filters = {
            "parent_run_id = %s": parent_run_id,
            "trigger = %s": trigger,
            "schedule_id = %s": schedule_id,
            "session_id = %s": session_id,
            "status = ANY(%s)": statuses,
            "status = %s": status,
            "agent = %s": agent,
        }
        clauses = ["tenant_id = %s", *(clause for clause, value in filters.items() if value)]
        if top_level:
            clauses.append("parent_run_id IS NULL")
        if waiting is not None:
            clauses.append(("" if waiting else "NOT ") + f"({WAITS_ON_SOMEONE})")
        params: list[object] = [tenant_id, *(value for value in filters.values() if value)]
        if before:
            clauses.append("(created_at, id) < (%s, %s)")
            params.extend(before)
        params.append(limit)
        query = (
            "SELECT * FROM runs WHERE "
            + " AND ".join(clauses)
            + " ORDER BY created_at DESC, id DESC LIMIT %s"
        )
        async with self._pool.connection() as conn:
            cur = await conn.execute(query, params)  # type: ignore[arg-type]
            rows = await cur.fetchall()
        return [RunRecord.model_validate(row) for row in rows]

    async def session_busy(self, session_id: str, *, besides: str = "") -> str | None:
        """The id of a queued or running run of the session (other than `besides`)."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT id FROM runs WHERE session_id = %s AND status IN ('queued', 'running')"
                " AND id <> %s ORDER BY created_at LIMIT 1",
                (session_id, besides),
            )
            row = await cur.fetchone()
        return str(row["id"]) if row else None

    # -- messages ---------------------------------------------------------

    async def conversation(
        self, run_id: str, session_id: str | None, *, after_step: int | None = None
    ) -> list[MessageRecord]:
        """Earlier runs of the session (input and report), then this run's messages.

        With `after_step` (the last step a compaction summary covers), only the opening
        messages and those after it: the summary stands for the rest.
        """
        async with self._pool.connection() as conn:
            history: list[MessageRecord] = []
            if session_id and after_step is None:
                cur = await conn.execute(
                    "SELECT input, report FROM runs WHERE session_id = %s AND id <> %s"
                    " AND created_at < (SELECT created_at FROM runs WHERE id = %s)"
                    " AND report IS NOT NULL ORDER BY created_at",
                    (session_id, run_id, run_id),
                )
                for row in await cur.fetchall():
                    history.append(MessageRecord(step=-1, ord=0, role="user", content=row["input"]))
                    history.append(
                        MessageRecord(step=-1, ord=1, role="assistant", content=row["report"])
                    )
            if after_step is None:
                cur = await conn.execute(
                    "SELECT step, ord, role, content, tool_calls, tool_call_id, name,"
                    " is_error, sha256 FROM messages WHERE run_id = %s ORDER BY step, ord",
                    (run_id,),
                )
            else:
                cur = await conn.execute(
                    "SELECT step, ord, role, content, tool_calls, tool_call_id, name,"
                    " is_error, sha256 FROM messages WHERE run_id = %s"
                    " AND (step = 0 OR step > %s) ORDER BY step, ord",
                    (run_id, after_step),
                )
            rows = [MessageRecord.model_validate(row) for row in await cur.fetchall()]
        if history and rows:
            # The system prompt stays first; earlier turns go before this run's input.
            return rows[:1] + history + rows[1:]
        return history + rows

    async def get_message(self, run_id: str, step: int, ord_: int) -> MessageRecord | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT step, ord, role, content, tool_calls, tool_call_id, name, is_error, sha256"
                " FROM messages WHERE run_id = %s AND step = %s AND ord = %s",
                (run_id, step, ord_),
            )
            row = await cur.fetchone()
        return MessageRecord.model_validate(row) if row else None

    async def put_user_message(self, run_id: str, step: int, ord_: int, content: str) -> None:
        async with self._pool.connection() as conn:
            await self._put_message(conn, run_id, step, ord_, "user", content)

    async def put_tool_message(
        self,
        *,
        run_id: str,
        step: int,
        ord_: int,
        call_id: str,
        name: str,
        content: str,
        is_error: bool,
        events: Sequence[tuple[int, str, dict[str, object]]] = (),
    ) -> bool:
        """Store a tool's output; returns whether an earlier step had the same output."""
        async with self._pool.connection() as conn, conn.pipeline(), conn.transaction():
            await self._put_message(
                conn,
                run_id,
                step,
                ord_,
                "tool",
                content,
                tool_call_id=call_id,
                name=name,
                is_error=is_error,
            )
            for seq, type_, data in events:
                await self._put_event(conn, run_id, seq, type_, data)
            return await self._output_repeats(conn, run_id, step, sha256_text(content))

    async def output_repeats(self, run_id: str, step: int, sha256: str) -> bool:
        """Whether a tool output of a step before `step` has this SHA-256."""
        async with self._pool.connection() as conn:
            return await self._output_repeats(conn, run_id, step, sha256)

    @staticmethod
    async def _output_repeats(
        conn: AsyncConnection[dict[str, Any]], run_id: str, step: int, sha256: str
    ) -> bool:
        cur = await conn.execute(
            "SELECT EXISTS (SELECT 1 FROM messages WHERE run_id = %s AND step < %s"
            " AND role = 'tool' AND sha256 = %s) AS repeats",
            (run_id, step, sha256),
        )
        row = await cur.fetchone()
        return bool(row and row["repeats"])

    async def copy_tool_message(
        self,
        *,
        run_id: str,
        step: int,
        ord_: int,
        call_id: str,
        name: str,
        source_step: int,
        source_ord: int,
        events: Sequence[tuple[int, str, dict[str, object]]] = (),
    ) -> None:
        """Answer a repeated call with the stored answer of the first one."""
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO messages (run_id, step, ord, role, content, tool_call_id, name,"
                " is_error, sha256)"
                " SELECT run_id, %s, %s, 'tool', content, %s, %s, is_error, sha256"
                " FROM messages WHERE run_id = %s AND step = %s AND ord = %s"
                " ON CONFLICT DO NOTHING",
                (step, ord_, call_id, name, run_id, source_step, source_ord),
            )
            for seq, type_, data in events:
                await self._put_event(conn, run_id, seq, type_, data)

    async def recorded_call(self, run_id: str, step: int) -> RecordedCall | None:
        """The model call already recorded for this step, if an earlier attempt made it."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT m.tool_calls, c.prompt_tokens, c.completion_tokens, c.latency_ms"
                " FROM messages m"
                " JOIN llm_calls c ON c.run_id = m.run_id AND c.step = m.step"
                " WHERE m.run_id = %s AND m.step = %s AND m.ord = 1 AND m.role = 'assistant'",
                (run_id, step),
            )
            row = await cur.fetchone()
        if row is None:
            return None
        return RecordedCall(
            tool_calls=row["tool_calls"] or [],
            prompt_tokens=row["prompt_tokens"],
            completion_tokens=row["completion_tokens"],
            latency_ms=row["latency_ms"],
        )

    async def record_assistant(
        self,
        *,
        run_id: str,
        step: int,
        content: str,
        tool_calls: list[dict[str, object]],
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        latency_ms: int,
        attempt: int,
        finish_reason: str,
        event_seq: int,
        cost_usd: float = 0.0,
        estimated_tokens: int = 0,
        views: Sequence[FileView] = (),
    ) -> None:
        """Store an LLM call's message, trace, usage and events in one transaction, with
        the lines of each file the request showed (the coverage ledger).

        Pipelined: the statements go out together and cost one round trip.
        """
        async with self._pool.connection() as conn, conn.pipeline(), conn.transaction():
            for view in views:
                await conn.execute(
                    RECORD_VIEW_SQL, (view.run_id, view.path, view.first, view.last, view.total)
                )
            await self._put_message(
                conn, run_id, step, 1, "assistant", content, tool_calls=tool_calls or None
            )
            # Usage counts once per step, however often the step's call is recorded.
            await conn.execute(
                RECORD_LLM_CALL_SQL,
                {
                    "run": run_id,
                    "step": step,
                    "model": model,
                    "prompt": prompt_tokens,
                    "completion": completion_tokens,
                    "latency": latency_ms,
                    "attempt": attempt,
                    "finish": finish_reason,
                    "cost": cost_usd,
                    "estimated": estimated_tokens,
                },
            )
            await self._put_event(
                conn,
                run_id,
                event_seq,
                "message",
                {
                    "step": step,
                    "content": content,
                    # With each call's id, so protocol adapters can tie results to calls.
                    "tool_calls": [_call_of(c) for c in tool_calls],
                },
            )
            await self._put_event(
                conn,
                run_id,
                event_seq + 1,
                "usage",
                {
                    "step": step,
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "latency_ms": latency_ms,
                },
            )

    async def claim_execution(self, run_id: str, step: int, ord_: int, claimant: str) -> bool:
        """Claim an acting call for `claimant`; False if an earlier attempt started it.

        A claim whose call never started (the worker died in between) passes to the new
        claimant, so a call is run once: never twice, and never dropped.
        """
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "INSERT INTO tool_executions (run_id, step, ord, claimant) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (run_id, step, ord) DO UPDATE SET claimant = EXCLUDED.claimant"
                " WHERE tool_executions.process_started_at IS NULL RETURNING 1",
                (run_id, step, ord_, claimant),
            )
            return await cur.fetchone() is not None

    async def execution_starts(self, run_id: str, step: int, ord_: int, claimant: str) -> bool:
        """Record that `claimant` starts the call now; False if another attempt took it over."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "UPDATE tool_executions SET process_started_at = now()"
                " WHERE run_id = %s AND step = %s AND ord = %s AND claimant = %s"
                " AND process_started_at IS NULL",
                (run_id, step, ord_, claimant),
            )
            return cur.rowcount == 1

    async def usage_by_tenant(self) -> list[dict[str, Any]]:
        """Runs, LLM calls, tokens and cost per tenant."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT r.tenant_id, count(DISTINCT r.id) AS runs,"
                " count(c.run_id) AS llm_calls,"
                " coalesce(sum(c.prompt_tokens), 0)::bigint AS prompt_tokens,"
                " coalesce(sum(c.completion_tokens), 0)::bigint AS completion_tokens,"
                " coalesce(sum(c.cost_usd), 0)::float AS cost_usd"
                " FROM runs r LEFT JOIN llm_calls c ON c.run_id = r.id"
                " GROUP BY r.tenant_id ORDER BY r.tenant_id"
            )
            return list(await cur.fetchall())

    # -- events -----------------------------------------------------------

    async def list_events(
        self, run_id: str, *, after: int = 0, limit: int = 500
    ) -> list[EventRecord]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT run_id, seq, type, data, created_at FROM events"
                " WHERE run_id = %s AND seq > %s ORDER BY seq LIMIT %s",
                (run_id, after, limit),
            )
            rows = await cur.fetchall()
        return [EventRecord.model_validate(row) for row in rows]

    # -- internals --------------------------------------------------------

    @staticmethod
    async def _put_message(
        conn: AsyncConnection[dict[str, Any]],
        run_id: str,
        step: int,
        ord_: int,
        role: str,
        content: str,
        *,
        tool_calls: list[dict[str, object]] | None = None,
        tool_call_id: str | None = None,
        name: str | None = None,
        is_error: bool = False,
    ) -> None:
        content = storable(content)
        await conn.execute(
            "INSERT INTO messages (run_id, step, ord, role, content, tool_calls, tool_call_id,"
            " name, is_error, sha256) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING",
            (
                run_id,
                step,
                ord_,
                role,
                content,
                Jsonb(storable_json(tool_calls)) if tool_calls is not None else None,
                tool_call_id,
                name,
                is_error,
                sha256_text(content),
            ),
        )

    @staticmethod
    async def put_event_in(
        conn: AsyncConnection[dict[str, Any]],
        run_id: str,
        seq: int,
        type_: str,
        data: dict[str, object],
    ) -> None:
        """Write an event inside a caller's transaction."""
        await Store._put_event(conn, run_id, seq, type_, data)

    @staticmethod
    async def _put_event(
        conn: AsyncConnection[dict[str, Any]],
        run_id: str,
        seq: int,
        type_: str,
        data: dict[str, object],
    ) -> None:
        # Events reach browsers and logs: secrets in them are masked.
        await conn.execute(
            "INSERT INTO events (run_id, seq, type, data) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING",
            (run_id, seq, type_, Jsonb(storable_json(redact(data)))),  # type: ignore[arg-type]
        )


def _call_of(call: dict[str, object]) -> dict[str, object]:
    """A stored tool call as the `message` event shows it: its function and its id."""
    function = call.get("function")
    return {**(function if isinstance(function, dict) else {}), "id": call.get("id")}
