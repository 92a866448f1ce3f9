"""Masked readable copies of tool calls, with their originals sealed beside them.

The tool activities and the LLM activity store a call's arguments and output through
this: what goes to events, the run's messages and the audit log is masked by the
policy; what was masked is sealed into `masked_originals` first. The model reads the
originals (`for_model`): it needs the real values to do its work, and the policy is
about what Keel keeps readable, not about what the model is told.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from keel.activities.masking.masker import Masker
from keel.activities.masking.sealing import OriginalSeal, SealBroken
from keel.activities.store.originals_store import OriginalKind, OriginalsStore, SealedOriginal
from keel.activities.store.records import MessageRecord
from keel.workflows.gate.models import GateResult
from keel.workflows.run.step_models import ToolCallInput

__all__ = ["CallPlace", "Readable", "ReadableCopies", "call_place", "gate_place"]

log = logging.getLogger("keel.masking")

# The ord of a step's first tool call: `workflows.run.agent_run.FIRST_TOOL_ORD` (a unit
# test holds the two equal; the workflow module is not imported into activities).
FIRST_TOOL_ORD = 2


@dataclass(frozen=True)
class CallPlace:
    """Which call of which run, and whose."""

    tenant_id: str
    run_id: str
    step: int
    ord: int
    call_id: str
    tool: str


def call_place(call: ToolCallInput) -> CallPlace:
    """Where a tool activity's call belongs."""
    return CallPlace(call.tenant_id, call.run_id, call.step, call.ord, call.call_id, call.name)


def gate_place(tenant_id: str, run_id: str, result: GateResult) -> CallPlace:
    """Where a call the gate answered belongs."""
    return CallPlace(tenant_id, run_id, result.step, result.ord, result.call_id, result.name)


@dataclass(frozen=True)
class Readable:
    """What may be stored readable: masked where the policy says."""

    arguments: str
    output: str
    content: str
    """The tool message's content: the approver's note, if any, then the output."""


class ReadableCopies:
    """Masks by the policy and seals originals; with no policy, copies pass unchanged."""

    def __init__(
        self, store: OriginalsStore | None, masker: Masker | None, seal: OriginalSeal | None
    ) -> None:
        self._store = store
        self._masker = masker if masker is not None and masker.enabled else None
        self._seal = seal

    @classmethod
    def off(cls) -> ReadableCopies:
        return cls(None, None, None)

    @property
    def enabled(self) -> bool:
        return self._masker is not None

    async def arguments(self, place: CallPlace, arguments: str) -> str:
        """The readable copy of a call's arguments (their original sealed when masked)."""
        if self._masker is None:
            return arguments
        masked = self._masker.text(place.tool, arguments)
        if masked is None:
            return arguments
        await self._keep(place, "tool_arguments", arguments)
        return masked

    async def call(
        self, place: CallPlace, arguments: str, output: str, note: str | None = None
    ) -> Readable:
        """The readable copies of a call's arguments and output; originals sealed first."""
        content = f"{note}\n\n{output}" if note else output
        if self._masker is None:
            return Readable(arguments=arguments, output=output, content=content)
        readable_arguments = await self.arguments(place, arguments)
        masked = self._masker.text(place.tool, output)
        if masked is None:  # not JSON: what it quotes of the masked arguments is masked
            masked = self._masker.quoted(place.tool, arguments, output)
        # The approver's note may name an argument it changed.
        masked_note = self._masker.quoted(place.tool, arguments, note) if note else None
        if masked is None and masked_note is None:
            return Readable(arguments=readable_arguments, output=output, content=content)
        # The original of what the model reads: note and output, as the message holds them.
        await self._keep(place, "tool_output", content)
        shown, shown_note = masked or output, masked_note or note
        return Readable(
            arguments=readable_arguments,
            output=shown,
            content=f"{shown_note}\n\n{shown}" if shown_note else shown,
        )

    async def copy_output(self, place: CallPlace, source_step: int, source_ord: int) -> None:
        """A cached answer reads like its first: its original is sealed again for it."""
        if self._store is None or self._seal is None:
            return
        original = self._opened(await self._store.output_at(place.run_id, source_step, source_ord))
        if original is not None:
            await self._keep(place, "tool_output", original)

    async def model_calls(
        self, tenant_id: str, run_id: str, step: int, tool_calls: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The readable copy of the tool calls a model asked for (the assistant message and
        its `message` event), each call's original arguments sealed where the tool
        activity will seal them too (its step and ord)."""
        if self._masker is None:
            return tool_calls
        readable: list[dict[str, Any]] = []
        for index, tool_call in enumerate(tool_calls):
            function = tool_call.get("function")
            if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
                readable.append(tool_call)
                continue
            place = CallPlace(
                tenant_id,
                run_id,
                step,
                FIRST_TOOL_ORD + index,
                str(tool_call.get("id") or ""),
                str(function.get("name") or ""),
            )
            arguments = await self.arguments(place, function["arguments"])
            readable.append({**tool_call, "function": {**function, "arguments": arguments}})
        return readable

    async def for_model(self, run_id: str, history: list[MessageRecord]) -> list[MessageRecord]:
        """The conversation with each masked tool output, and each masked argument of the
        model's own calls, replaced by its original."""
        if self._store is None or self._seal is None:
            return history
        if not any(m.role in ("tool", "assistant") for m in history):
            return history
        sealed = {(o.kind, o.step, o.ord): o for o in await self._store.of_run(run_id)}
        if not sealed:
            return history
        restored: list[MessageRecord] = []
        for message in history:
            if message.role == "tool":
                text = self._opened(sealed.get(("tool_output", message.step, message.ord)))
                if text is not None:
                    message = message.model_copy(update={"content": text})
            elif message.role == "assistant" and message.tool_calls:
                calls = [
                    _with_arguments(
                        c,
                        self._opened(
                            sealed.get(("tool_arguments", message.step, FIRST_TOOL_ORD + i))
                        ),
                    )
                    for i, c in enumerate(message.tool_calls)
                ]
                message = message.model_copy(update={"tool_calls": calls})
            restored.append(message)
        return restored

    def _opened(self, original: SealedOriginal | None) -> str | None:
        if original is None or self._seal is None:
            return None
        try:
            return self._seal.open(original.key_id, original.sealed, original.place)
        except SealBroken as exc:  # the model reads the masked copy, and the log says why
            log.warning("%s step %s: %s", original.run_id, original.step, exc)
            return None

    async def _keep(self, place: CallPlace, kind: OriginalKind, original: str) -> None:
        assert self._store is not None and self._seal is not None, "masking needs its seal"
        row = SealedOriginal(
            run_id=place.run_id,
            step=place.step,
            ord=place.ord,
            kind=kind,
            tenant_id=place.tenant_id,
            call_id=place.call_id,
            tool=place.tool,
            key_id="",
            sealed=b"",
        )
        key_id, sealed = self._seal.seal(original, row.place)
        await self._store.put(row.model_copy(update={"key_id": key_id, "sealed": sealed}))


def _with_arguments(tool_call: dict[str, object], arguments: str | None) -> dict[str, object]:
    function = tool_call.get("function")
    if arguments is None or not isinstance(function, dict):
        return tool_call
    return {**tool_call, "function": {**function, "arguments": arguments}}
