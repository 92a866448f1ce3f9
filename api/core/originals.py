"""Originals of masked values: read back only with keel:read-original, audited first.

The order is the guarantee: the caller's scope and tenant are checked, the audit entry
of the read is appended and committed, and only then is the original opened and
returned. If the entry cannot be written, nothing is opened; if opening fails after it,
the caller gets an error and no plaintext, and the entry stands (an attempt is worth
knowing about too). `keel:admin` alone is refused (403, audited): reading personal data
is a grant of its own. The grant is per tenant: another tenant's original answers 404,
audited like every cross-tenant attempt.
"""

from __future__ import annotations

from keel.activities.masking import OriginalSeal, SealBroken
from keel.activities.store.audit import AuditEntry
from keel.activities.store.originals_store import OriginalKind, OriginalsStore
from keel.api.core.context import CoreParts
from keel.api.core.errors import Forbidden, Misconfigured, NotFound
from keel.api.core.runs import RunService
from keel.api.core.schemas.originals import OriginalKindName, OriginalPublic
from keel.api.identity.auth import Principal
from keel.worker.config.masking import original_seal

__all__ = ["READ_ORIGINAL_SCOPE", "OriginalReads"]

READ_ORIGINAL_SCOPE = "keel:read-original"
KINDS: dict[OriginalKindName, OriginalKind] = {
    "tool-output": "tool_output",
    "tool-arguments": "tool_arguments",
}


class OriginalReads:
    def __init__(self, parts: CoreParts, runs: RunService) -> None:
        self._parts = parts
        self._runs = runs
        self._store = OriginalsStore(parts.store.pool)
        self._seal: OriginalSeal | None = original_seal(parts.settings)

    async def read(
        self,
        kind: OriginalKindName,
        run_id: str,
        step: int,
        call_id: str,
        user: Principal,
        *,
        reason: str | None = None,
    ) -> OriginalPublic:
        """The original, after the audit entry of this read has committed."""
        subject = f"{run_id}/{step}/{call_id}"
        if not user.has_scope(READ_ORIGINAL_SCOPE):
            # Through the refusal limiter every 403 shares, so a flood cannot fill the log.
            await self._parts.audit.forbidden(
                user,
                "original.read_refused",
                subject,
                reason=f"needs the {READ_ORIGINAL_SCOPE} scope",
                detail={"kind": kind},
            )
            raise Forbidden(
                f"Reading an original needs the {READ_ORIGINAL_SCOPE} scope; keel:admin alone "
                "does not give it. Ask for a token that carries it."
            )
        run = await self._runs.get(run_id, user, allow_admin=False)  # 404, audited
        sealed = await self._store.of_call(run.id, step, call_id, KINDS[kind])
        if sealed is None or sealed.tenant_id != user.tenant_id:
            raise NotFound(
                f"No masked {kind.replace('-', ' ')} of call {call_id} at step {step} of "
                f"{run_id}: nothing of it was masked, or it is not this run's."
            )
        # Committed before anything is opened: `append` runs in a transaction of its own.
        entry = await self._parts.audit.log.append(
            AuditEntry(
                tenant_id=user.tenant_id,
                actor=user.subject,
                category="privacy",
                action="original.read",
                severity="warning",
                subject=subject,
                detail={"kind": kind, "tool": sealed.tool, "reason": reason},
            )
        )
        if self._seal is None:
            raise Misconfigured(
                "This API has no KEEL_PAYLOAD_KEYS, so it cannot open originals: give it the "
                "same keys as the workers."
            )
        try:
            original = self._seal.open(sealed.key_id, sealed.sealed, sealed.place)
        except SealBroken as exc:
            raise Misconfigured(str(exc)) from exc
        return OriginalPublic(
            kind=kind,
            run_id=run.id,
            step=step,
            call_id=call_id,
            tool=sealed.tool,
            original=original,
            audit_id=entry.id,
        )
