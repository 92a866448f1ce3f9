"""`keel quota` (admins set, show and clear tenants' quotas) and `keel usage` (what your
tenant used, and what its quotas leave)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from keel.activities.store.console_reads import UsageRow
from keel.activities.store.quota_store import TenantQuota
from keel.api.cli.client import KeelClient
from keel.api.cli.command_errors import run_command
from keel.api.cli.connection import keel_api
from keel.api.cli.request_body import request_body
from keel.api.core.quotas import QuotaUpdate, TenantQuotas

quota_app = typer.Typer(
    help="Tenants' quotas: tokens and cost per UTC day and month (needs keel:admin).",
    no_args_is_help=True,
)
console = Console()
TenantOption = Annotated[str, typer.Option("--tenant", help="The tenant the quota is for.")]
UserOption = Annotated[
    str | None, typer.Option("--user", help="A user (sub) of the tenant: their own quota.")
]
FLAGS = {
    "tokens_per_day": "--tokens-per-day",
    "cost_usd_per_day": "--cost-per-day",
    "tokens_per_month": "--tokens-per-month",
    "cost_usd_per_month": "--cost-per-month",
}


class QuotaClient(KeelClient):
    async def __aenter__(self) -> QuotaClient:
        return self

    async def every(self) -> list[TenantQuota]:
        response = await self._send("GET", "/v1/admin/quotas")
        return [TenantQuota.model_validate(q) for q in response.json()]

    async def tenant(self, tenant: str) -> TenantQuotas:
        response = await self._send("GET", f"/v1/admin/quotas/tenants/{tenant}")
        return TenantQuotas.model_validate(response.json())

    async def set(self, tenant: str, user: str | None, body: QuotaUpdate) -> TenantQuota:
        response = await self._send(
            "PUT",
            f"/v1/admin/quotas/tenants/{tenant}",
            params={"user": user} if user else {},
            json=body.model_dump(exclude_none=True),
        )
        return TenantQuota.model_validate(response.json())

    async def clear(self, tenant: str, user: str | None) -> None:
        await self._send(
            "DELETE", f"/v1/admin/quotas/tenants/{tenant}", params={"user": user} if user else {}
        )

    async def mine(self) -> TenantQuotas:
        return TenantQuotas.model_validate((await self._send("GET", "/v1/usage/quota")).json())

    async def daily(self, days: int) -> list[UsageRow]:
        response = await self._send("GET", "/v1/usage", params={"days": days})
        return [UsageRow.model_validate(r) for r in response.json()]


def _figure(measure: str, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if measure == "tokens" else f"${value:,.4f}"


def _lines_table(view: TenantQuotas) -> Table:
    table = Table("whose", "period", "measure", "limit", "used", "remaining", "resets (UTC)")
    for ln in view.lines:
        table.add_row(
            escape(f"user {ln.user_id}" if ln.user_id else "tenant"),
            ln.period,
            ln.measure,
            _figure(ln.measure, ln.limit),
            _figure(ln.measure, ln.used),
            ("[red]0 (reached)[/red]" if ln.reached else _figure(ln.measure, ln.remaining)),
            ln.resets_at.strftime("%Y-%m-%d %H:%M"),
        )
    return table


@quota_app.command("set")
def quota_set(
    tenant: TenantOption,
    user: UserOption = None,
    tokens_per_day: Annotated[int | None, typer.Option(help="Tokens per UTC day.")] = None,
    cost_per_day: Annotated[float | None, typer.Option(help="US dollars per UTC day.")] = None,
    tokens_per_month: Annotated[int | None, typer.Option(help="Tokens per UTC month.")] = None,
    cost_per_month: Annotated[float | None, typer.Option(help="US dollars per UTC month.")] = None,
) -> None:
    """Set the tenant's quota (or, with --user, that user's), replacing the one it had."""
    body = request_body(
        QuotaUpdate,
        flags=FLAGS,
        tokens_per_day=tokens_per_day,
        cost_usd_per_day=cost_per_day,
        tokens_per_month=tokens_per_month,
        cost_usd_per_month=cost_per_month,
    )

    async def main() -> None:
        async with keel_api(QuotaClient) as (client, _):
            stored = await client.set(tenant, user, body)
        whose = (
            f"User {stored.user_id} of tenant {tenant}" if stored.user_id else f"Tenant {tenant}"
        )
        ceilings = ", ".join(
            f"{FLAGS[k].removeprefix('--')} {v:g}"
            for k, v in stored.model_dump(include=set(FLAGS)).items()
            if v is not None
        )
        console.print(escape(f"{whose}: quota set ({ceilings})."))

    run_command(main())


@quota_app.command("show")
def quota_show(
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="One tenant, with usage; default: all.")
    ] = None,
) -> None:
    """Every quota set; with --tenant, that tenant's with what each period used and left."""

    async def main() -> None:
        async with keel_api(QuotaClient) as (client, _):
            if tenant is not None:
                view = await client.tenant(tenant)
                console.print(_lines_table(view))
                if view.refused:
                    console.print(f"[red]New runs are refused:[/red] {escape(view.refused)}")
                return
            quotas = await client.every()
        if not quotas:
            console.print("No quota is set: no tenant's runs are limited.")
            return
        table = Table("tenant", "user", *(f.removeprefix("--") for f in FLAGS.values()), "set by")
        for q in quotas:
            table.add_row(
                escape(q.tenant_id),
                escape(q.user_id or "(tenant)"),
                *(
                    "-" if v is None else f"{v:g}"
                    for v in (
                        q.tokens_per_day,
                        q.cost_usd_per_day,
                        q.tokens_per_month,
                        q.cost_usd_per_month,
                    )
                ),
                escape(q.updated_by),
            )
        console.print(table)

    run_command(main())


@quota_app.command("clear")
def quota_clear(tenant: TenantOption, user: UserOption = None) -> None:
    """Remove the tenant's quota (or, with --user, that user's)."""

    async def main() -> None:
        async with keel_api(QuotaClient) as (client, _):
            await client.clear(tenant, user)
        whose = f"User {user} of tenant {tenant}" if user else f"Tenant {tenant}"
        console.print(escape(f"{whose}: no quota."))

    run_command(main())


def usage_command(
    days: Annotated[int, typer.Option(help="Days of usage to list.", min=1, max=366)] = 7,
) -> None:
    """What your tenant used per UTC day and agent, and what its quotas leave."""

    async def main() -> None:
        async with keel_api(QuotaClient) as (client, _):
            rows = await client.daily(days)
            view = await client.mine()
        table = Table("day", "agent", "calls", "tokens", "cost")
        for r in rows:
            table.add_row(
                r.day.isoformat(),
                escape(r.agent),
                str(r.llm_calls),
                f"{r.prompt_tokens + r.completion_tokens:,}",
                f"${r.cost_usd:,.4f}",
            )
        console.print(table if rows else f"No model calls in the last {days} days.")
        if not view.lines:
            console.print(f"Tenant {escape(view.tenant_id)} has no quota.")
            return
        console.print(_lines_table(view))
        if view.refused:
            console.print(f"[red]New runs are refused:[/red] {escape(view.refused)}")

    run_command(main())
