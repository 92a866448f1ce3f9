"""/v1/runs/{run_id}/events: a run's durable events, as pages of JSON or as a live stream."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse

from keel.api.core.errors import Invalid
from keel.api.core.schemas.common import StoredText
from keel.api.core.schemas.events import EventPage, EventPublic
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, documented

router = APIRouter(prefix="/v1/runs", tags=["events"], responses=AUTHENTICATED)

STREAM_DESCRIPTION = """\
Server-sent events of a run, live. Each durable event is sent once, in `seq` order:

    id: <seq>
    event: <type>
    data: {"seq": …, "type": …, "data": {…}, "created_at": …}

While the model writes, `message_delta` events carry its text as it arrives
(`data: {"run_id", "step", "attempt", "delta_index", "delta"}`). They have no
`id:`, are never stored, and a reconnecting client does not get them again;
the durable `message` event that follows holds the whole text. `delta_index`
counts the pieces of one attempt at one step; a retried step starts again at 0.

Resume after a dropped connection with the `Last-Event-ID` header (browsers'
`EventSource` sends it), or with `?after=<seq>`; the header wins. The comment
`: connected` opens the stream once it is subscribed, and `: keepalive` is sent
after 15 s of silence. The stream ends after the run's
terminal event (`done`, `error` or `cancelled`); a finished run streams what it
has and ends.
"""


# One event as a client's SSE parser reads it; `data` is the JSON of an `EventPublic`, or of a
# `message_delta`.
SSE_EVENT = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "id": {"type": "string", "description": "The event's `seq`; deltas have none."},
        "event": {"type": "string", "description": "The event's type."},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}


@router.get("/{run_id}/events", response_model=EventPage, responses=documented(404))
async def list_events(
    run_id: StoredText,
    service: ServiceDep,
    user: CurrentUser,
    after: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 500,
) -> EventPage:
    record = await service.runs.get(run_id, user)
    events = await service.runs.events(record.id, user, after=after, limit=limit)
    return EventPage(
        events=[EventPublic.from_record(e, record.tenant_id) for e in events],
        next_after=events[-1].seq if events else after,
    )


@router.get(
    "/{run_id}/events/stream",
    summary="Stream a run's events (SSE)",
    description=STREAM_DESCRIPTION,
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "An open `text/event-stream`, ending after the terminal event.",
            "content": {
                "text/event-stream": {
                    "schema": SSE_EVENT,
                    "example": (
                        'id: 1\nevent: run_started\ndata: {"seq": 1, "type": "run_started", '
                        '"data": {"agent": "review"}, "created_at": "2025-01-01T00:00:00Z"}\n\n'
                        'event: message_delta\ndata: {"run_id": "run-1", "step": 1, '
                        '"attempt": 1, "delta_index": 0, "delta": "Look"}\n\n'
                        ": keepalive\n\n"
                    ),
                }
            },
        },
        **documented(404),
    },
)
async def stream_events(
    run_id: StoredText,
    service: ServiceDep,
    user: CurrentUser,
    after: Annotated[
        int, Query(ge=0, description="Send the events after this seq (0: from the start).")
    ] = 0,
    last_event_id: Annotated[
        str | None,
        Header(description="The `id` of the last event received; overrides `after`."),
    ] = None,
) -> StreamingResponse:
    record = await service.runs.get(run_id, user)
    if last_event_id is not None and last_event_id.strip():
        try:
            after = int(last_event_id)
        except ValueError:
            raise Invalid(
                "Last-Event-ID must be the seq of an event this stream sent; "
                "send it back unchanged or omit it to start over.",
                field="Last-Event-ID",
                where="header",
            ) from None
    return StreamingResponse(
        service.events.stream(record, after=after).sse(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
