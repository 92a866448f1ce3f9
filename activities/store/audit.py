"""The audit log: append-only, hash-chained, with secrets redacted before they are stored.

Each tenant has its own chain (rows without a tenant form the system chain).
A row's hash is the SHA-256 of the canonical JSON of its content and the
previous row's hash in the same chain, so an edited, deleted or moved row
breaks the chain and `AuditLog.verify` names it. Appends to one chain are
serialised by an advisory lock held while the last hash is read and the new
row inserted, so the chain never forks. The table's trigger refuses UPDATE,
DELETE and TRUNCATE as well (migration 003).

The chain alone cannot show that rows were cut from its end; to catch that,
keep the last hash somewhere else now and then and compare.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any, Literal

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field, JsonValue

from keel.activities.store.postgres_text import storable, storable_json

__all__ = [
    "GENESIS_HASH",
    "REDACTED",
    "AuditEntry",
    "AuditLog",
    "AuditRecord",
    "AuditSeverity",
    "AuditVerification",
    "ChainProblem",
    "redact",
]

AuditSeverity = Literal["info", "warning", "critical"]
ChainProblem = Literal["edited", "deleted", "reordered"]

# The prev_hash of the first row of every chain.
GENESIS_HASH = "0" * 64
# Any fixed number works; the second key of the lock names the chain.
AUDIT_LOCK_ID = 7_411_204
REDACTED = "[redacted]"


class AuditEntry(BaseModel):
    """Something worth keeping a tamper-evident record of."""

    tenant_id: str | None = None
    """The tenant it concerns; None for system events (they form their own chain)."""
    actor: str | None = None
    """Who did it: a user or service (`sub`), `system`, or `policy`; None if unknown."""
    category: str
    """What area it belongs to, e.g. `auth`, `approval`, `run`, `admin`."""
    action: str
    """What happened, e.g. `interaction.approved`, `tenant.access_denied`."""
    severity: AuditSeverity = "info"
    """How much attention it deserves."""
    subject: str | None = None
    """What it happened to, e.g. a run or interaction id."""
    detail: dict[str, JsonValue] = Field(default_factory=dict)
    """Structured context; secrets in it are redacted before it is stored."""


class AuditRecord(AuditEntry):
    """An audit entry as stored, with its place in the chain."""

    id: int
    """Position in the log; increases along every chain."""
    created_at: datetime
    """When it was appended; never earlier than the row before it in its chain."""
    prev_hash: str
    """The hash of the previous row in the same chain, or `GENESIS_HASH` for the first."""
    hash: str
    """SHA-256 (hex) of this row's content and `prev_hash`."""


class AuditVerification(BaseModel):
    """The outcome of checking the audit chains."""

    ok: bool
    """True when every chain checked is intact."""
    rows_checked: int
    """How many rows were read and checked."""
    chains_checked: int
    """How many chains (tenants, plus the system chain) were checked."""
    broken_id: int | None = None
    """The id of the first row (lowest id) where a chain breaks; None when intact."""
    problem: ChainProblem | None = None
    """Why it breaks: the row was `edited`, a row before it was `deleted`, or rows were
    `reordered`; None when intact."""
    message: str
    """A sentence for a person saying what was found."""


def policy_entry(
    tenant_id: str, subject: str, action: str, *, tool: str, rule: str, arguments: object
) -> AuditEntry:
    """What a permission rule decided about one tool call, without a person: denied
    (a warning) or allowed to run without asking."""
    return AuditEntry(
        tenant_id=tenant_id,
        actor="policy",
        category="approval",
        action=action,
        severity="warning" if action.endswith("denied_by_policy") else "info",
        subject=subject,
        detail={"tool": tool, "rule": rule, "arguments": arguments},  # type: ignore[dict-item]
    )


class AuditLog:
    """Appends to and verifies the `audit_log` table through a psycopg pool."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[Any]]) -> None:
        self._pool = pool

    async def append(self, entry: AuditEntry) -> AuditRecord:
        """Redact, chain and store one entry; returns the stored row."""
        async with self._pool.connection() as conn, conn.transaction():
            return await self.append_in(conn, entry)

    async def append_once(self, entry: AuditEntry) -> None:
        """Append unless the tenant's chain already has this subject and action: a retried
        activity audits what it did once. Checked under the chain's lock, so two
        attempts racing cannot both append."""
        assert entry.subject is not None, "only an entry with a subject can be told apart"
        chain, params = _chain_filter(entry.tenant_id)
        async with self._pool.connection() as conn, conn.transaction():
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                "SELECT pg_advisory_xact_lock(%s, %s)",
                (AUDIT_LOCK_ID, _chain_key(entry.tenant_id)),
            )
            await cur.execute(
                f"SELECT 1 FROM audit_log WHERE {chain} AND subject = %s AND action = %s LIMIT 1",
                (*params, _stored_subject(entry.subject), entry.action),
            )
            if await cur.fetchone() is None:
                await self.append_in(conn, entry)

    @staticmethod
    async def append_in(conn: AsyncConnection[Any], entry: AuditEntry) -> AuditRecord:
        """Append inside a caller's transaction, so the entry commits with what it records."""
        # Whoever writes the entry, NUL (which Postgres refuses) never fails the append.
        detail = storable_json(redact(entry.detail))
        subject = _stored_subject(entry.subject) if entry.subject is not None else None
        actor = storable(entry.actor) if entry.actor is not None else None
        chain, params = _chain_filter(entry.tenant_id)
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(
            "SELECT pg_advisory_xact_lock(%s, %s)", (AUDIT_LOCK_ID, _chain_key(entry.tenant_id))
        )
        await cur.execute(
            f"SELECT hash, created_at FROM audit_log WHERE {chain} ORDER BY id DESC LIMIT 1",
            params,
        )
        last = await cur.fetchone()
        # The detail as Postgres will give it back, so verification hashes the same value.
        await cur.execute("SELECT %s::jsonb AS detail, clock_timestamp() AS now", (Jsonb(detail),))
        fresh = await cur.fetchone()
        assert fresh is not None
        created_at: datetime = fresh["now"]
        prev_hash = GENESIS_HASH
        if last is not None:
            prev_hash = last["hash"]
            # Keeps time monotone along the chain even if the clock steps back.
            created_at = max(created_at, last["created_at"])
        record = {
            "tenant_id": entry.tenant_id,
            "actor": actor,
            "category": entry.category,
            "action": entry.action,
            "severity": entry.severity,
            "subject": subject,
            "detail": fresh["detail"],
            "created_at": created_at,
            "prev_hash": prev_hash,
        }
        record["hash"] = _row_hash(record)
        await cur.execute(
            "INSERT INTO audit_log (created_at, tenant_id, actor, category, action,"
            " severity, subject, detail, prev_hash, hash)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (
                created_at,
                entry.tenant_id,
                actor,
                entry.category,
                entry.action,
                entry.severity,
                subject,
                Jsonb(fresh["detail"]),
                prev_hash,
                record["hash"],
            ),
        )
        inserted = await cur.fetchone()
        assert inserted is not None
        return AuditRecord.model_validate({**record, "id": inserted["id"]})

    async def entries(
        self, tenant_id: str | None = None, *, after_id: int = 0, limit: int = 100
    ) -> list[AuditRecord]:
        """Rows in id order; all tenants when `tenant_id` is None."""
        clause, params = ("", ()) if tenant_id is None else _chain_filter(tenant_id)
        where = f"AND {clause}" if clause else ""
        async with self._pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                f"SELECT * FROM audit_log WHERE id > %s {where} ORDER BY id LIMIT %s",
                (after_id, *params, limit),
            )
            rows = await cur.fetchall()
        return [AuditRecord.model_validate(row) for row in rows]

    async def verify(self, tenant_id: str | None = None) -> AuditVerification:
        """Check one tenant's chain, or every chain when `tenant_id` is None."""
        where: str = ""
        params: tuple[str, ...] = ()
        if tenant_id is not None:
            where, params = "WHERE tenant_id = %s", (tenant_id,)
        breaks: list[_Break] = []
        rows = chains = 0
        async with self._pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            chain: _ChainState | None = None
            async for row in cur.stream(
                "SELECT id, created_at, tenant_id, actor, category, action, severity, subject,"
                f" detail, prev_hash, hash FROM audit_log {where} ORDER BY tenant_id, id",
                params,
            ):
                if chain is None or row["tenant_id"] != chain.tenant_id:
                    chain = _ChainState(row["tenant_id"])
                    chains += 1
                if chain.broken:
                    continue  # one break per chain; the rows after it prove nothing
                rows += 1
                if _row_hash(row) != row["hash"]:
                    breaks.append(_Break(row["id"], "edited", chain.last_id, None))
                    chain.broken = True
                elif row["prev_hash"] != chain.expected_prev:
                    breaks.append(_Break(row["id"], "deleted", chain.last_id, row["prev_hash"]))
                    chain.broken = True
                chain.expected_prev, chain.last_id = row["hash"], row["id"]
            if not breaks:
                return AuditVerification(
                    ok=True,
                    rows_checked=rows,
                    chains_checked=chains,
                    message=f"The audit log is intact: {rows} rows in {chains} chains verified.",
                )
            first = min(breaks, key=lambda b: b.row_id)
            follows: int | None = None
            if first.claimed_prev is not None:
                # A link to a row that exists elsewhere means rows were moved, not removed.
                found = await cur.execute(
                    "SELECT id FROM audit_log WHERE hash = %s", (first.claimed_prev,)
                )
                hit = await found.fetchone()
                if hit is not None:
                    first.problem, follows = "reordered", hit["id"]
        return AuditVerification(
            ok=False,
            rows_checked=rows,
            chains_checked=chains,
            broken_id=first.row_id,
            problem=first.problem,
            message=first.describe(follows),
        )


class _ChainState:
    def __init__(self, tenant_id: str | None) -> None:
        self.tenant_id = tenant_id
        self.expected_prev = GENESIS_HASH
        self.last_id: int | None = None
        self.broken = False


class _Break:
    def __init__(
        self, row_id: int, problem: ChainProblem, after_id: int | None, claimed_prev: str | None
    ) -> None:
        self.row_id = row_id
        self.problem: ChainProblem = problem
        self.after_id = after_id
        self.claimed_prev = claimed_prev

    def describe(self, follows: int | None) -> str:
        where = f"row {self.after_id}" if self.after_id is not None else "the start of its chain"
        if self.problem == "edited":
            return (
                f"Audit row {self.row_id} was changed after it was written: its content "
                "no longer matches its hash."
            )
        if self.problem == "reordered":
            return (
                f"Audit rows were reordered: row {self.row_id} was written after row "
                f"{follows} but now sits after {where}."
            )
        return (
            f"Audit rows are missing before row {self.row_id}: it does not follow {where} "
            "(rows between were deleted, or the row before it was rewritten)."
        )


def _stored_subject(subject: str) -> str:
    return storable(_redact_text(subject))


def _chain_filter(tenant_id: str | None) -> tuple[str, tuple[str, ...]]:
    if tenant_id is None:
        return "tenant_id IS NULL", ()
    return "tenant_id = %s", (tenant_id,)


def _chain_key(tenant_id: str | None) -> int:
    """A signed 32-bit lock key per chain; a collision only serialises two chains."""
    digest = hashlib.sha256((tenant_id or "").encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


def _row_hash(row: dict[str, Any]) -> str:
    """SHA-256 over the canonical JSON of a row's content and its prev_hash."""
    created_at: datetime = row["created_at"]
    payload = {
        "prev_hash": row["prev_hash"],
        "created_at": created_at.astimezone(UTC).isoformat(timespec="microseconds"),
        "tenant_id": row["tenant_id"],
        "actor": row["actor"],
        "category": row["category"],
        "action": row["action"],
        "severity": row["severity"],
        "subject": row["subject"],
        "detail": row["detail"],
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


# -- redaction ---------------------------------------------------------------

# Matched against the key lowercased with separators removed ("X-Api-Key" -> "xapikey").
_SECRET_KEY_PARTS = (
    "password",
    "passwd",
    "secret",
    "apikey",
    "authorization",
    "accesskey",
    "privatekey",
    "cookie",
)
_KEY_WORDS = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_SECRET_TEXT: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = (
    # Each with the texts one of which a match must hold (in the lowercased text, for
    # the case-blind bearer): a string without any of them is not searched.
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.DOTALL,
        ),
        REDACTED,
        ("-----BEGIN ",),
    ),
    # A bearer credential is long and not a plain word ("the bearer of bad news").
    (
        re.compile(
            r"(?i)\b(bearer)\s+(?=[A-Za-z0-9\-._~+/]*[0-9\-._~+/])[A-Za-z0-9\-._~+/]{12,}=*"
        ),
        rf"\1 {REDACTED}",
        ("bearer",),
    ),
    (re.compile(r"\beyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"), REDACTED, ("eyJ",)),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"), REDACTED, ("sk-",)),
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), REDACTED, ("AKIA", "ASIA")),
    # The password in a URL: scheme://user:password@host
    (re.compile(r"(?<=://)([^/\s:@]+):[^/\s@]+@"), rf"\1:{REDACTED}@", ("://",)),
)
_CASE_BLIND = 1
"""The index of the bearer pattern, whose word matches whatever its case."""


def redact(value: JsonValue) -> JsonValue:
    """A copy of a JSON-like value with secrets masked.

    Values under secret-looking keys (password, token, api_key, cookie, ...)
    become `"[redacted]"` unless they are null; inside any string, bearer
    tokens, JWTs, `sk-` keys, AWS access key ids, PEM private keys and URL
    passwords are masked.
    """
    if isinstance(value, dict):
        return {
            key: REDACTED if item is not None and _is_secret_key(str(key)) else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    if isinstance(value, str):
        return _redact_text(value)
    return value


@functools.lru_cache(maxsize=4096)
def _is_secret_key(key: str) -> bool:
    compact = re.sub(r"[^a-z0-9]", "", key.lower())
    if any(part in compact for part in _SECRET_KEY_PARTS):
        return True
    # "access_token", "idToken", "csrftoken" — but not counts like "max_tokens".
    return any(word.lower().endswith("token") for word in _KEY_WORDS.split(key))


def _redact_text(text: str) -> str:
    for index, (pattern, replacement, needs) in enumerate(_SECRET_TEXT):
        searched = text.lower() if index == _CASE_BLIND else text
        if any(need in searched for need in needs):
            text = pattern.sub(replacement, text)
    return text
