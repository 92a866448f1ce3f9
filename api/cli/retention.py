"""`keel retention`: how long tenants' finished runs keep their contents (admins)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from keel.activities.store.retention_store import RetentionPolicy
from keel.api.cli.client import KeelClient
from keel.api.cli.command_errors import run_command
from keel.api.cli.connection import keel_api
from keel.api.core.schemas.admin import RetentionPolicyUpdate, RetentionSweepStarted

retention_app = typer.Typer(
    help="Per-tenant retention of finished runs' contents (needs keel:admin).",
    no_args_is_help=True,
)
console = Console()
TenantOption = Annotated[str, typer.Option("--tenant", help="The tenant the policy is for.")]


class RetentionClient(KeelClient):
    async def __aenter__(self) -> RetentionClient:
        return self

    async def policies(self) -> list[RetentionPolicy]:
        response = await self._send("GET", "/v1/admin/retention")
        return [RetentionPolicy.model_validate(p) for p in response.json()]

    async def set_policy(self, tenant: str, days: int) -> RetentionPolicy:
        body = RetentionPolicyUpdate(days=days).model_dump()
        response = await self._send("PUT", f"/v1/admin/retention/tenants/{tenant}", json=body)
        return RetentionPolicy.model_validate(response.json())

    async def clear_policy(self, tenant: str) -> None:
        await self._send("DELETE", f"/v1/admin/retention/tenants/{tenant}")

    async def sweep(self) -> RetentionSweepStarted:
        response = await self._send("POST", "/v1/admin/retention/sweeps")
        return RetentionSweepStarted.model_validate(response.json())


@retention_app.command("show")
def retention_show() -> None:
    """Every tenant's policy and what its sweeps removed; tenants not listed keep all."""

    async def main() -> None:
        async with keel_api(RetentionClient) as (client, _):
            policies = await client.policies()
        if not policies:
            console.print("No tenant has a retention policy: every run is kept.")
            return
        table = Table("tenant", "days", "set by", "last sweep", "runs emptied", "removed head")
        for p in policies:
            swept = p.last_swept_at.isoformat(timespec="seconds") if p.last_swept_at else "-"
            head = (p.removed_head or "-")[:16]
            table.add_row(p.tenant_id, str(p.days), p.updated_by, swept, str(p.runs_purged), head)
        console.print(table)

    run_command(main())


@retention_app.command("set")
def retention_set(
    days: Annotated[int, typer.Argument(help="Days after a run finishes.", min=1, max=36_500)],
    tenant: TenantOption,
) -> None:
    """Empty the tenant's finished runs `days` days after they finish."""

    async def main() -> None:
        async with keel_api(RetentionClient) as (client, _):
            policy = await client.set_policy(tenant, days)
        console.print(f"Tenant {policy.tenant_id}: runs are emptied {policy.days} days after.")

    run_command(main())


@retention_app.command("clear")
def retention_clear(tenant: TenantOption) -> None:
    """Keep the tenant's runs for ever again."""

    async def main() -> None:
        async with keel_api(RetentionClient) as (client, _):
            await client.clear_policy(tenant)
        console.print(f"Tenant {tenant}: runs are kept.")

    run_command(main())


@retention_app.command("sweep")
def retention_sweep() -> None:
    """Run the retention sweep now, on a worker, instead of at its next time."""

    async def main() -> None:
        async with keel_api(RetentionClient) as (client, _):
            started = await client.sweep()
        console.print(f"Sweep asked of schedule {started.schedule_id}; a worker runs it.")

    run_command(main())
