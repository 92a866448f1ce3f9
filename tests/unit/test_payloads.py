"""Keel's data converter: compact JSON that decodes to the same values."""

from __future__ import annotations

import json

from temporalio.converter import DataConverter

from keel.worker.temporal_client import DATA_CONVERTER, KeelPayloadConverter
from keel.workflows.gate.models import MessageRef
from keel.workflows.run.models import RunState
from keel.workflows.run.step_models import LlmStepResult, ToolCallInput, ToolCallRequest, ToolDigest
from keel.workflows.usage.models import Usage

converter = DATA_CONVERTER.payload_converter


def test_fields_at_their_defaults_are_left_out() -> None:
    call = ToolCallInput(
        run_id="r1",
        step=2,
        ord=2,
        call_id="c1",
        name="read_file",
        arguments="{}",
        workspace="/w",
        event_seq=5,
        allowed_by="read * allow",
    )
    [payload] = converter.to_payloads([call])
    written = json.loads(payload.data)
    assert "tenant_id" not in written and "interaction_id" not in written
    assert written["allowed_by"] == "read * allow" and written["step"] == 2
    assert converter.from_payloads([payload], [ToolCallInput]) == [call]


def test_values_changed_in_place_survive_the_round_trip() -> None:
    state = RunState()
    state.step = 3
    state.answered["fp"] = MessageRef(step=1, ord=2)  # mutated, never assigned: still written
    state.usage = state.usage.plus(Usage(prompt_tokens=10))
    [payload] = converter.to_payloads([state])
    [back] = converter.from_payloads([payload], [RunState])
    assert back == state and back.answered == {"fp": MessageRef(step=1, ord=2)}
    assert back.usage.prompt_tokens == 10


def test_payloads_written_in_full_still_decode() -> None:
    result = LlmStepResult(
        tool_calls=[ToolCallRequest(call_id="c1", name="read_file", arguments="{}")],
        tokens=[5, 1],
        latency_ms=7,
    )
    # As the stock pydantic converter wrote it, with fields this version dropped.
    full = DataConverter.default.payload_converter.to_payloads(
        [{**result.model_dump(), "content_preview": "", "finish_reason": "tool_calls"}]
    )
    assert converter.from_payloads(full, [LlmStepResult]) == [result]
    [compact] = converter.to_payloads([result])
    assert len(compact.data) < len(full[0].data)


def test_step_digests_are_small() -> None:
    step = LlmStepResult(tokens=[100, 20], latency_ms=9)
    assert step.spent() == Usage(prompt_tokens=100, completion_tokens=20)
    [payload] = converter.to_payloads([step])
    assert json.loads(payload.data) == {"latency_ms": 9, "tokens": [100, 20]}
    # A fresh, successful tool output is the empty digest.
    [fresh] = converter.to_payloads([ToolDigest()])
    assert fresh.data == b"{}"
    [stale] = converter.from_payloads(
        converter.to_payloads([ToolDigest(stale=True, is_error=True)]), [ToolDigest]
    )
    assert stale.stale and stale.is_error


def test_converters_of_every_context_share_one_json_converter() -> None:
    """Temporal builds a payload converter for each serialization context, several an
    activation: they share the compact JSON converter, so its cached type adapters last."""
    first, second = KeelPayloadConverter(), KeelPayloadConverter()
    assert first.converters[b"json/plain"] is second.converters[b"json/plain"]
    payloads = first.to_payloads([MessageRef(step=2, ord=1)])
    assert second.from_payloads(payloads, [MessageRef]) == [MessageRef(step=2, ord=1)]
