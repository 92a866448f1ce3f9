"""The `runs` table: a run's row from queued to finished, and the runs lists."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from pydantic import JsonValue

from keel.activities.store.audit import AuditEntry, AuditLog
from keel.activities.store.event_rows import put_event_in
from keel.activities.store.findings_store import FindingsLedger
from keel.activities.store.interaction_closing import close_pending_in
from keel.activities.store.interaction_rows import event_data
from keel.activities.store.message_rows import put_message_in
from keel.activities.store.records import NewRun, RunRecord
from keel.activities.store.run_texts import (
    INSERT_RUN_TEXTS_SQL,
    MissingRunTexts,
    RunTexts,
    texts_key,
)
from keel.activities.store.run_tree import WAITS_ON_SOMEONE
from keel.workflows.run.models import StartRunInput

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
COVERAGE_SECTION_SQL = "SELECT coverage->>'section' AS section FROM runs WHERE id = %s"
FORGET_UNSTARTED_RUN_SQL = (
    "DELETE FROM runs WHERE id = %s AND status = 'queued' AND started_at IS NULL"
    " AND NOT EXISTS (SELECT 1 FROM events WHERE run_id = %s)"
)
REPORT_MESSAGE_SQL = "SELECT content FROM messages WHERE run_id = %s AND step = %s AND ord = 1"
FINISH_RUN_SQL = (
    "UPDATE runs SET status = %s, stop_reason = %s, error = %s,"
    " report = coalesce(%s, report), steps = %s, tool_calls = %s,"
    " findings = coalesce(%s, findings),"
    " finished_at = coalesce(finished_at, now()) WHERE id = %s"
)
END_CLOSED_ELSEWHERE_SQL = (
    "UPDATE runs SET status = %s, stop_reason = %s, error = coalesce(error, %s),"
    " finished_at = coalesce(finished_at, now())"
    " WHERE id = %s AND status NOT IN ('completed', 'failed', 'cancelled')"
)
SELECT_RUN_SQL = "SELECT * FROM runs WHERE id = %s"
SESSION_BUSY_SQL = (
    "SELECT id FROM runs WHERE session_id = %s AND status IN ('queued', 'running')"
    " AND id <> %s ORDER BY created_at LIMIT 1"
)


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


async def create_run_in(conn: AsyncConnection[dict[str, Any]], run: NewRun) -> bool:
    """`RunRows.create_run` inside a caller's transaction (a fork's seed joins it)."""
    if not await _insert_queued(conn, run):
        return False
    if run.system_prompt is not None:
        await conn.execute(
            INSERT_RUN_TEXTS_SQL,
            (run.tenant_id, texts_key(run.system_prompt, run.input), run.system_prompt, run.input),
        )
    return True


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


class RunRows(RunTexts):
    """Runs' rows: created queued, started, finished; read one or a page."""

    async def create_run(self, run: NewRun) -> bool:
        """Record a queued run, and its texts, in one transaction; False if a run with this
        id already exists (then nothing is written)."""
        async with self._pool.connection() as conn, conn.transaction():
            return await create_run_in(conn, run)

    async def forget_unstarted_run(self, run_id: str) -> None:
        """Remove a queued run whose workflow could not be started, so none is left that
        says it is waiting to run; a workflow that did start records its run again."""
        async with self._pool.connection() as conn:
            await conn.execute(FORGET_UNSTARTED_RUN_SQL, (run_id, run_id))

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
            await put_message_in(conn, start.run_id, 0, 0, "system", start.system_prompt)
            await put_message_in(conn, start.run_id, 0, 1, "user", start.input)
            started: dict[str, object] = {
                "agent": start.agent,
                "model": start.model,
                "trigger": start.trigger,
                "input": start.input,
            }
            if start.schedule_id:
                started["schedule_id"] = start.schedule_id
            await put_event_in(conn, start.run_id, start.event_seq, "run_started", started)
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
                cur = await conn.execute(REPORT_MESSAGE_SQL, (run_id, final_step))
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
                FINISH_RUN_SQL,
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
                await put_event_in(
                    conn, run_id, event_seq + offset, "interaction_resolved", event_data(ia)
                )
            data: dict[str, object] = {"status": status, "stop_reason": stop_reason}
            if error:
                data["error"] = error
            await put_event_in(conn, run_id, event_seq + len(closed), event_type, data)
        return report

    async def end_closed_elsewhere(self, run_id: str, *, status: str, error: str) -> bool:
        """Record the end of a run whose workflow closed without saying so (terminated or
        timed out in Temporal): its row and what it waited on. False if already recorded."""
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                END_CLOSED_ELSEWHERE_SQL,
                (status, "error" if status == "failed" else "cancelled", error, run_id),
            )
            if cur.rowcount == 0:
                return False
            await close_pending_in(conn, run_id, run_status=status, stop_reason="closed_elsewhere")
            return True

    async def get_run(self, run_id: str) -> RunRecord | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(SELECT_RUN_SQL, (run_id,))
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
            cur = await conn.execute(SESSION_BUSY_SQL, (session_id, besides))
            row = await cur.fetchone()
        return str(row["id"]) if row else None
