"""Several scripts behind one scripted OpenAI-compatible endpoint, chosen by model name.

A worker talks to one `OPENAI_BASE_URL`, but an eval runs many scenarios at once, each
with its own script: each scenario's runs ask for their own model name, and this
server answers a request with the script of the model it names. Each script plays as
`ScriptedLLMServer` plays it (turns chosen from the request alone), so parallel runs
of one script do not disturb each other.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn

__all__ = ["ScriptedModelServer"]


class ScriptedModelServer(ScriptedLLMServer):
    """Serves `scripts` (model name → script) on one port; `start()`/`stop()` as the base."""

    def __init__(self, scripts: dict[str, Script], host: str = "127.0.0.1", port: int = 0) -> None:
        if not scripts:
            raise ValueError("A scripted model server needs at least one script.")
        # The base's own script only names the server; every request goes to a model's.
        super().__init__(Script(name="scripted-models", turns=[Turn(content="-")]), host, port)
        self.models = {
            name: ScriptedLLMServer(script.model_copy(update={"name": name}))
            for name, script in scripts.items()
        }
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._route, methods=["POST"]),
                Route("/v1/models", self._list, methods=["GET"]),
            ]
        )

    async def _route(self, request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            body = None
        model = body.get("model") if isinstance(body, dict) else None
        server = self.models.get(model) if isinstance(model, str) else None
        if server is None:
            known = ", ".join(sorted(self.models))
            error = {
                "message": f"The model {model!r} does not exist here; this server plays {known}.",
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found",
            }
            return JSONResponse({"error": error}, status_code=404)
        return await server.answer(request)

    async def _list(self, request: Request) -> Response:
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "keel"}
            for name in self.models
        ]
        return JSONResponse({"object": "list", "data": data})
