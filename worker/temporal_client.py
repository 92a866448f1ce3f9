"""Connecting to Temporal with Keel's data converter."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from pydantic_core import SchemaSerializer
from pydantic_core.core_schema import any_schema
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, Plugin
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
    JSONPlainPayloadConverter,
)
from temporalio.runtime import Runtime


class CompactJsonPayloadConverter(PydanticJSONPlainPayloadConverter):
    """Pydantic JSON without the fields that hold their default values.

    Every payload lands in a run's history, most of them once a step, and most
    fields of Keel's models sit at their defaults. Decoding fills them back in, so
    the values round-trip unchanged. The rule that follows: never change the
    default of a field of a model that travels through Temporal, or histories
    already written would decode differently. Add a new field instead.
    """

    def __init__(self) -> None:
        super().__init__()
        self._compact = SchemaSerializer(any_schema())

    def to_payload(self, value: Any) -> Payload | None:
        data = self._compact.to_json(value, exclude_defaults=True)
        return Payload(metadata={"encoding": self.encoding.encode()}, data=data)


@functools.cache
def _encoding_converters() -> tuple[EncodingPayloadConverter, ...]:
    """Temporal's default encoding converters, compact JSON in place of plain: one set for
    the process, as Temporal's own defaults are one set (they hold no state but caches)."""
    compact = CompactJsonPayloadConverter()
    return tuple(
        compact if isinstance(c, JSONPlainPayloadConverter) else c
        for c in DefaultPayloadConverter.default_encoding_payload_converters
    )


class KeelPayloadConverter(CompositePayloadConverter):
    """Temporal's default converters, with compact pydantic JSON in place of plain JSON.

    Temporal builds a converter for every serialization context, several each workflow
    activation; they share one set of encoding converters, so building one is a dict of
    five entries, and the pydantic type adapters compact JSON caches outlive it.
    """

    def __init__(self) -> None:
        super().__init__(*_encoding_converters())


DATA_CONVERTER = DataConverter(payload_converter_class=KeelPayloadConverter)


async def connect(
    address: str,
    namespace: str = "default",
    *,
    plugins: Sequence[Plugin] = (),
    runtime: Runtime | None = None,
    data_converter: DataConverter = DATA_CONVERTER,
) -> Client:
    """A client whose payloads are Keel's pydantic models.

    `plugins` come from `keel.worker.observability.tracing`, `runtime` (metrics) from
    `keel.worker.observability.metrics`,
    `data_converter` (encrypting when a key is set) from `worker.payload_codec`.
    """
    return await Client.connect(
        address,
        namespace=namespace,
        data_converter=data_converter,
        plugins=list(plugins),
        runtime=runtime,
    )
