"""A small HTTP client for Keel's API, used by the CLI."""

from __future__ import annotations

import asyncio

import httpx

from keel.activities.store.audit import AuditVerification
from keel.api.cli.flag_names import error_lines
from keel.api.core.coordinations.schemas import (
    CoordinationCreate,
    CoordinationList,
    CoordinationPublic,
)
from keel.api.core.schemas.evals import EvalResultCreate, EvalResultPublic
from keel.api.core.schemas.events import EventPage
from keel.api.core.schemas.forks import ForkCreate
from keel.api.core.schemas.health import Health
from keel.api.core.schemas.interactions import (
    DecisionResult,
    InteractionDecisionCreate,
    InteractionPublic,
)
from keel.api.core.schemas.runs import RunCreate, RunList, RunPublic


class KeelApiError(RuntimeError):
    """The API refused a request; the message is the API's explanation."""


def _explain(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        detail = response.text
    if isinstance(detail, list):
        lines = error_lines(d for d in detail if isinstance(d, dict))
        detail = "; ".join([line.removesuffix(".") for line in lines[:-1]] + lines[-1:])
    # A refusal of what the user asked (a bad value, an unknown id) is its sentence; the
    # status says more when the server or the login is at fault.
    if response.status_code in (400, 404, 409, 422):
        return str(detail)
    return f"{response.status_code}: {detail}"


class KeelClient:
    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 30.0) -> None:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout, headers=headers)

    async def __aenter__(self) -> KeelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    async def _send(self, method: str, path: str, **kwargs: object) -> httpx.Response:
        response = await self._http.request(method, path, **kwargs)  # type: ignore[arg-type]
        if response.status_code >= 400:
            raise KeelApiError(_explain(response))
        return response

    async def health(self) -> Health:
        """The API's health, with the Temporal address it uses (no token needed)."""
        return Health.model_validate((await self._send("GET", "/health")).json())

    async def create_run(self, body: RunCreate) -> RunPublic:
        response = await self._send("POST", "/v1/runs", json=body.model_dump(exclude_none=True))
        return RunPublic.model_validate(response.json())

    async def start_coordination(self, body: CoordinationCreate) -> CoordinationPublic:
        response = await self._send(
            "POST", "/v1/coordinations", json=body.model_dump(mode="json", exclude_none=True)
        )
        return CoordinationPublic.model_validate(response.json())

    async def get_coordination(self, coordination_id: str) -> CoordinationPublic:
        response = await self._send("GET", f"/v1/coordinations/{coordination_id}")
        return CoordinationPublic.model_validate(response.json())

    async def wait_coordination(
        self, coordination_id: str, every_s: float = 1.0
    ) -> CoordinationPublic:
        """Poll until the coordination has finished, however it ended."""
        while True:
            found = await self.get_coordination(coordination_id)
            if found.status not in ("running", "cancelling"):
                return found
            await asyncio.sleep(every_s)

    async def list_coordinations(
        self, limit: int = 20, cursor: str | None = None
    ) -> CoordinationList:
        """The tenant's coordinations, newest first; `cursor` is a page's `next_cursor`."""
        params: dict[str, str | int] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        response = await self._send("GET", "/v1/coordinations", params=params)
        return CoordinationList.model_validate(response.json())

    async def cancel_coordination(self, coordination_id: str) -> CoordinationPublic:
        response = await self._send("POST", f"/v1/coordinations/{coordination_id}/cancel")
        return CoordinationPublic.model_validate(response.json())

    async def get_run(self, run_id: str) -> RunPublic:
        return RunPublic.model_validate((await self._send("GET", f"/v1/runs/{run_id}")).json())

    async def list_runs(
        self,
        limit: int = 20,
        *,
        children: bool = False,
        parent: str | None = None,
        status: str | None = None,
    ) -> RunList:
        """Top-level runs, newest first; with `children`, sub-agent runs too; with `parent`,
        the sub-agent runs that run started; with `status`, only runs in that status."""
        params: dict[str, str | int] = {"limit": limit}
        if status is not None:
            params["status"] = status
        if children:
            params["children"] = "include"
        if parent is not None:
            params["parent"] = parent
        response = await self._send("GET", "/v1/runs", params=params)
        return RunList.model_validate(response.json())

    async def events(self, run_id: str, after: int = 0) -> EventPage:
        response = await self._send("GET", f"/v1/runs/{run_id}/events", params={"after": after})
        return EventPage.model_validate(response.json())

    async def interactions(self, run_id: str) -> list[InteractionPublic]:
        response = await self._send("GET", f"/v1/runs/{run_id}/interactions")
        return [InteractionPublic.model_validate(item) for item in response.json()]

    async def interaction(self, run_id: str, interaction_id: str) -> InteractionPublic:
        response = await self._send("GET", f"/v1/runs/{run_id}/interactions/{interaction_id}")
        return InteractionPublic.model_validate(response.json())

    async def decide(
        self, run_id: str, interaction_id: str, body: InteractionDecisionCreate
    ) -> DecisionResult:
        response = await self._send(
            "POST",
            f"/v1/runs/{run_id}/interactions/{interaction_id}",
            json=body.model_dump(mode="json", exclude_none=True),
        )
        return DecisionResult.model_validate(response.json())

    async def give_secret(self, run_id: str, interaction_id: str, secret: str) -> DecisionResult:
        """Answer a `secret_ref` interaction; the value goes in the body, nowhere else."""
        response = await self._send(
            "POST",
            f"/v1/runs/{run_id}/interactions/{interaction_id}",
            json={"decision": "answer", "secret": secret},
        )
        return DecisionResult.model_validate(response.json())

    async def decide_reject(self, run_id: str, interaction_id: str) -> DecisionResult:
        response = await self._send(
            "POST", f"/v1/runs/{run_id}/interactions/{interaction_id}", json={"decision": "reject"}
        )
        return DecisionResult.model_validate(response.json())

    async def verify_audit(self, tenant: str | None = None) -> AuditVerification:
        params = {"tenant": tenant} if tenant else {}
        response = await self._send("GET", "/v1/admin/audit/verify", params=params)
        return AuditVerification.model_validate(response.json())

    async def fork(self, run_id: str, body: ForkCreate) -> RunPublic:
        response = await self._send(
            "POST", f"/v1/runs/{run_id}/fork", json=body.model_dump(exclude_none=True)
        )
        return RunPublic.model_validate(response.json())

    async def cancel(self, run_id: str) -> RunPublic:
        response = await self._send("POST", f"/v1/runs/{run_id}/cancel")
        return RunPublic.model_validate(response.json())

    async def record_eval(self, body: EvalResultCreate) -> EvalResultPublic:
        response = await self._send("POST", "/v1/evals", json=body.model_dump(mode="json"))
        return EvalResultPublic.model_validate(response.json())
