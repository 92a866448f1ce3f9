"""The LangGraph Agent Server API subset, mounted under `/langgraph`.

Point a `langgraph-sdk` client at `http://HOST:8470/langgraph` with a Keel token as
its API key (`x-api-key`) or as `Authorization: Bearer`. Refusals are Keel's Problem
JSON (`{"detail": ...}`), which the SDK raises as its typed errors (404 `NotFoundError`,
409 `ConflictError`, 422 `UnprocessableEntityError`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from keel.api.core.errors import Invalid, known_id
from keel.api.core.service import KeelService
from keel.api.http.deps import current_user
from keel.api.identity.auth import Principal
from keel.api.langgraph import wire
from keel.api.langgraph.adapter import LangGraphAdapter, StartedLangGraphRun, stream_modes

__all__ = ["PREFIX", "router"]

PREFIX = "/langgraph"
router = APIRouter(prefix=PREFIX, tags=["langgraph"], include_in_schema=False)
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


async def _caller(request: Request) -> Principal:
    """The verified caller; the SDK sends its API key as `x-api-key`, which Keel reads as
    a bearer token (the same token `Authorization: Bearer` carries)."""
    key = request.headers.get("x-api-key")
    if request.headers.get("authorization") is None and key:
        service: KeelService = request.app.state.service
        return await service.authenticate(
            f"Bearer {key}",
            path=request.url.path,
            client=request.client.host if request.client else None,
        )
    return await current_user(request)


def _adapter(request: Request) -> LangGraphAdapter:
    return LangGraphAdapter(request.app.state.service)


Caller = Annotated[Principal, Depends(_caller)]
Adapter = Annotated[LangGraphAdapter, Depends(_adapter)]


# -- assistants --------------------------------------------------------------------


@router.post("/assistants/search")
async def search_assistants(
    body: wire.AssistantSearch, adapter: Adapter, user: Caller
) -> list[dict[str, Any]]:
    return adapter.assistants(body, user)


@router.get("/assistants/{assistant_id}")
async def get_assistant(assistant_id: str, adapter: Adapter, user: Caller) -> dict[str, Any]:
    return adapter.assistant(assistant_id, user)


@router.get("/info")
async def info(user: Caller) -> dict[str, Any]:
    return {"version": "keel", "flags": {"assistants": True, "crons": True}}


# -- threads -----------------------------------------------------------------------


@router.post("/threads")
async def create_thread(body: wire.ThreadCreate, adapter: Adapter, user: Caller) -> dict[str, Any]:
    return await adapter.create_thread(body, user)


@router.post("/threads/search")
async def search_threads(
    body: wire.ThreadSearch, adapter: Adapter, user: Caller
) -> list[dict[str, Any]]:
    return await adapter.search_threads(body, user)


@router.get("/threads/{thread_id}")
async def get_thread(thread_id: str, adapter: Adapter, user: Caller) -> dict[str, Any]:
    return await adapter.thread(thread_id, user)


@router.get("/threads/{thread_id}/state")
async def thread_state(thread_id: str, adapter: Adapter, user: Caller) -> dict[str, Any]:
    return await adapter.state(thread_id, user)


@router.post("/threads/{thread_id}/history")
async def thread_history(
    thread_id: str, adapter: Adapter, user: Caller, body: wire.ThreadHistoryRequest | None = None
) -> list[dict[str, Any]]:
    return await adapter.history(thread_id, user, body.limit if body else 10)


# -- runs --------------------------------------------------------------------------


@router.post("/threads/{thread_id}/runs")
async def create_run(
    thread_id: str,
    body: wire.LangGraphRunCreate,
    request: Request,
    adapter: Adapter,
    user: Caller,
) -> JSONResponse:
    started = await adapter.start(known_id(thread_id, "thread"), body, user)
    return JSONResponse(await adapter.run_view(started, user), headers=_locations(request, started))


@router.post("/runs")
async def create_stateless_run(
    body: wire.LangGraphRunCreate, adapter: Adapter, user: Caller
) -> dict[str, Any]:
    started = await adapter.start(None, body, user)
    return await adapter.run_view(started, user)


@router.post("/threads/{thread_id}/runs/stream")
async def stream_run(
    thread_id: str,
    body: wire.LangGraphRunCreate,
    request: Request,
    adapter: Adapter,
    user: Caller,
) -> StreamingResponse:
    started = await adapter.start(known_id(thread_id, "thread"), body, user)
    return await _streamed(request, adapter, started, stream_modes(body.stream_mode), user)


@router.post("/runs/stream")
async def stream_stateless_run(
    body: wire.LangGraphRunCreate, request: Request, adapter: Adapter, user: Caller
) -> StreamingResponse:
    started = await adapter.start(None, body, user)
    return await _streamed(request, adapter, started, stream_modes(body.stream_mode), user)


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(
    thread_id: str,
    body: wire.LangGraphRunCreate,
    request: Request,
    adapter: Adapter,
    user: Caller,
) -> JSONResponse:
    started = await adapter.start(known_id(thread_id, "thread"), body, user)
    headers = {**_locations(request, started), "Location": f"{_run_url(request, started)}/join"}
    return JSONResponse(await adapter.wait(started, user), headers=headers)


@router.post("/runs/wait")
async def wait_stateless_run(
    body: wire.LangGraphRunCreate, adapter: Adapter, user: Caller
) -> dict[str, Any]:
    started = await adapter.start(None, body, user)
    return await adapter.wait(started, user)


@router.get("/threads/{thread_id}/runs")
async def list_runs(
    thread_id: str,
    adapter: Adapter,
    user: Caller,
    limit: Annotated[int, Query(ge=1, le=1000)] = 10,
) -> list[dict[str, Any]]:
    return await adapter.runs(thread_id, user, limit)


@router.get("/threads/{thread_id}/runs/{run_id}")
async def get_run(thread_id: str, run_id: str, adapter: Adapter, user: Caller) -> dict[str, Any]:
    return await adapter.run(thread_id, run_id, user)


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(thread_id: str, run_id: str, adapter: Adapter, user: Caller) -> dict[str, Any]:
    return await adapter.wait(await adapter.joined(thread_id, run_id, user), user)


@router.get("/threads/{thread_id}/runs/{run_id}/stream")
async def join_stream(
    thread_id: str,
    run_id: str,
    request: Request,
    adapter: Adapter,
    user: Caller,
    stream_mode: Annotated[list[str] | None, Query()] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    started = await adapter.joined(thread_id, run_id, user)
    after = 0
    if last_event_id and last_event_id.strip():
        if not last_event_id.strip().isdigit():
            raise Invalid(
                "Last-Event-ID must be the id of an event this stream sent.",
                field="Last-Event-ID",
                where="header",
            )
        after = int(last_event_id)
    modes = stream_modes(stream_mode or list(wire.SUPPORTED_STREAM_MODES))
    return await _streamed(request, adapter, started, modes, user, after_seq=after)


@router.post("/threads/{thread_id}/runs/{run_id}/cancel")
async def cancel_run(
    thread_id: str,
    run_id: str,
    adapter: Adapter,
    user: Caller,
    action: Annotated[str, Query()] = "interrupt",
) -> Response:
    await adapter.cancel(thread_id, run_id, action, user)
    return Response(status_code=204)


# -- crons -------------------------------------------------------------------------


@router.post("/runs/crons")
async def create_cron(body: wire.CronCreate, adapter: Adapter, user: Caller) -> dict[str, Any]:
    return await adapter.create_cron(body, user)


@router.post("/threads/{thread_id}/runs/crons")
async def create_thread_cron(thread_id: str, user: Caller) -> dict[str, Any]:
    raise Invalid(
        "Crons on a thread are not supported: Keel's crons start stateless runs. Create the "
        "cron with POST /langgraph/runs/crons (client.crons.create).",
        field="thread_id",
        where="path",
    )


@router.post("/runs/crons/search")
async def search_crons(
    body: wire.CronSearch, adapter: Adapter, user: Caller
) -> list[dict[str, Any]]:
    return await adapter.search_crons(body, user)


@router.delete("/runs/crons/{cron_id}")
async def delete_cron(cron_id: str, adapter: Adapter, user: Caller) -> Response:
    await adapter.delete_cron(cron_id, user)
    return Response(status_code=204)


# -- shared ------------------------------------------------------------------------


async def _streamed(
    request: Request,
    adapter: LangGraphAdapter,
    started: StartedLangGraphRun,
    modes: list[str],
    user: Principal,
    *,
    after_seq: int = 0,
) -> StreamingResponse:
    translator = await adapter.translator(started, modes, user, after_seq=after_seq)
    headers = dict(SSE_HEADERS)
    if started.thread_id is not None:
        # Where the SDK reconnects (with Last-Event-ID) if the connection drops.
        headers.update(_locations(request, started))
        headers["Location"] = f"{_run_url(request, started)}/stream"
    return StreamingResponse(
        adapter.sse(started, translator), media_type="text/event-stream", headers=headers
    )


def _run_url(request: Request, started: StartedLangGraphRun) -> str:
    """The run's absolute URL: the SDK joins a path to its base URL (which ends in the
    prefix) but follows an absolute same-origin URL as it is."""
    base = str(request.base_url).rstrip("/") + PREFIX
    return f"{base}/threads/{started.thread_id}/runs/{started.run_id}"


def _locations(request: Request, started: StartedLangGraphRun) -> dict[str, str]:
    """`Content-Location` names the run, so the SDK's `on_run_created` learns its id."""
    if started.thread_id is None:
        return {"Content-Location": f"{PREFIX}/runs/{started.run_id}"}
    return {"Content-Location": _run_url(request, started)}
