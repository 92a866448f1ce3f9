"""AG-UI: `POST /ag-ui/{agent}` takes a `RunAgentInput` and streams AG-UI events (SSE).

Thread id = session: the first request on a thread creates the session (on the
workspace `forwardedProps.workspace`, or the root), later ones continue it. A request
that carries `resume` entries answers the interrupts the last one ended with, and the
same durable run goes on in its stream. Authentication and tenancy are the REST API's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import RunAgentInput
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from keel.api.agui.translate import AgUiTranslator
from keel.api.core.errors import Invalid, known_id
from keel.api.core.run_orders import RunOrder
from keel.api.core.schemas.interactions import InteractionPublic
from keel.api.core.service import KeelService
from keel.api.core.threads import ThreadRun
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.identity.auth import Principal

__all__ = ["PREFIX", "router"]

PREFIX = "/ag-ui"
# Out of the OpenAPI schema like the other protocol adapters (A2A, MCP, LangGraph): its
# contract is the AG-UI protocol, documented in docs/ag-ui.md.
router = APIRouter(prefix=PREFIX, tags=["ag-ui"], include_in_schema=False)


@router.post(
    "/{agent}",
    summary="Run an agent for an AG-UI client (SSE)",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def run_agent(
    agent: str, body: RunAgentInput, request: Request, service: ServiceDep, user: CurrentUser
) -> StreamingResponse:
    started = await _start(service, agent, body, user)

    async def pending(run_id: str) -> list[InteractionPublic]:
        return await service.threads.waiting_of(run_id, user)

    translator = AgUiTranslator(
        thread_id=body.thread_id,
        request_run_id=body.run_id,
        keel_run_id=started.run_id,
        pending=pending,
        after_interactions=started.resumed,
    )
    encoder = EventEncoder(accept=request.headers.get("accept", ""))

    async def sse() -> AsyncIterator[str]:
        yield encoder.encode(translator.started())
        async for event in translator.events(service.events.stream(started.record).items()):
            yield encoder.encode(event)

    return StreamingResponse(
        sse(),
        media_type=encoder.get_content_type(),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _start(
    service: KeelService, agent: str, body: RunAgentInput, user: Principal
) -> ThreadRun:
    """Resume the thread's run with the answers the request carries, or start a new one."""
    thread_id = known_id(body.thread_id, "thread")
    props: dict[str, Any] = body.forwarded_props if isinstance(body.forwarded_props, dict) else {}
    if body.resume:  # answers an interrupt: the thread must be the caller's already
        session = await service.sessions.get(thread_id, user)
        answers = {
            entry.interrupt_id: (
                (True if entry.payload is None else entry.payload)
                if entry.status == "resolved"
                else "reject"
            )
            for entry in body.resume
        }
        return await service.threads.resume(session, answers, user)
    session = await service.threads.session(
        thread_id, {"graph_id": agent, "workspace": props.get("workspace") or "."}, user
    )
    order = RunOrder.of(
        agent=agent,
        input=_last_user_text(body),
        workspace=session.workspace,
        trigger="api",
        run_id=body.run_id,
        session_id=thread_id,  # as the caller knows it: the service finds its session
        model=session.model,
        approver=session.approver,
    )
    started = await service.runs.start(order, user)
    return ThreadRun(record=started.record, thread_id=thread_id)


def _last_user_text(body: RunAgentInput) -> str:
    for message in reversed(body.messages):
        if getattr(message, "role", None) != "user":
            continue
        content = getattr(message, "content", None)
        if isinstance(content, list):
            content = "\n".join(str(getattr(p, "text", "")) for p in content if hasattr(p, "text"))
        if isinstance(content, str) and content.strip():
            return content
    raise Invalid("messages must hold a user message with text to start a run.", field="messages")
