"""Admin surfaces: the audit log and its verification, usage and cost, request limits."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

import httpx
import psycopg

from keel.activities.llm.prices import ModelPrice
from keel.worker.scripted.llm import Script, Turn
from tests.conftest import JWT_SECRET, auth_headers
from tests.integration.conftest import LaunchKeel
from tests.integration.keel_http import base_url

ALICE = auth_headers("default", "alice")
ADMIN = auth_headers("default", "root", "keel:admin")


async def keel(*args: str, env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "keel.api.cli.main",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=120)
    return proc.returncode or 0, out.decode()


async def test_usage_and_cost_per_run_and_per_tenant(workspace: Path, keel_app: LaunchKeel) -> None:
    script = Script(
        turns=[Turn(content="priced", prompt_tokens=1_000_000, completion_tokens=500_000)]
    )
    prices = {"priced-model": ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)}
    async with keel_app(script, headers={}, model="priced-model", prices=prices) as http:
        tenant = auth_headers("priced-tenant", "payer")
        created = await http.post(
            "/v1/runs",
            headers=tenant,
            json={"agent": "explore", "input": "x", "workspace": str(workspace)},
        )
        run_id = created.json()["id"]
        for _ in range(400):
            run = (await http.get(f"/v1/runs/{run_id}", headers=tenant)).json()
            if run["status"] == "completed":
                break
            await asyncio.sleep(0.05)
        assert run["usage"]["cost_usd"] == 6.0  # 1M in at $2 + 0.5M out at $8
        assert (await http.get("/v1/admin/usage", headers=tenant)).status_code == 403
        usage = (await http.get("/v1/admin/usage", headers=ADMIN)).json()
        mine = next(u for u in usage if u["tenant_id"] == "priced-tenant")
        assert mine["runs"] == 1 and mine["cost_usd"] == 6.0
        assert mine["prompt_tokens"] == 1_000_000


async def every_audit_row(http: httpx.AsyncClient) -> list[dict[str, object]]:
    """The whole log, every tenant's, page by page: other tests' rows come first."""
    rows: list[dict[str, object]] = []
    while True:
        params = {"limit": 1000, "after_id": rows[-1]["id"] if rows else 0}
        page = (await http.get("/v1/admin/audit", headers=ADMIN, params=params)).json()
        if not page:
            return rows
        rows += page


async def test_audit_verify_detects_an_edited_row(
    tmp_path: Path, database_url: str, keel_app: LaunchKeel
) -> None:
    # A tenant of its own: other tests break other tenants' chains on purpose, in this
    # same database, so this one verifies and tampers with its own chain only.
    tenant = f"tenant-{uuid.uuid4().hex[:8]}"
    eve = auth_headers(tenant, "eve")
    async with keel_app(Script(turns=[Turn(content="unused")]), headers={}, worker=False) as http:
        url = base_url(http)
        # Produce audited events: a refused token, and admin work refused to a non-admin.
        assert (
            await http.get("/v1/runs", headers={"authorization": "Bearer nope"})
        ).status_code == 401
        assert (await http.get("/v1/runs/none", headers=ALICE)).status_code == 404
        assert (await http.get("/v1/admin/audit", headers=ALICE)).status_code == 403
        assert (await http.get("/v1/admin/retention", headers=eve)).status_code == 403
        refused = await http.delete(f"/v1/admin/retention/tenants/{tenant}", headers=eve)
        assert refused.status_code == 403
        rows = (await http.get("/v1/admin/audit", headers=ADMIN, params={"tenant": tenant})).json()
        assert [r["action"] for r in rows] == [
            "retention.read.refused",
            "retention.clear.refused",
        ], rows
        log = await every_audit_row(http)
        assert any(r["action"] == "token.refused" and r["subject"] == "/v1/runs" for r in log)
        assert "nope" not in str(log)

        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",)}
        env.update(KEEL_API_URL=url, KEEL_JWT_SECRET=JWT_SECRET, KEEL_DATA_DIR=str(tmp_path))
        code, out = await keel("audit", "verify", "--tenant", tenant, env=env)
        assert code == 0 and "intact" in out.lower(), out
        # Said once: one line, not the same count twice; the tenant's rows, all of them.
        assert len(out.strip().splitlines()) == 1 and out.count("chains") == 1, out
        assert "2 rows in 1 chains" in " ".join(out.split()), out

        # Tamper with one row of the tenant's chain, as an attacker with database access would.
        victim = rows[-1]
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute("ALTER TABLE audit_log DISABLE TRIGGER ALL")
            try:
                await conn.execute(
                    "UPDATE audit_log SET actor = 'nobody' WHERE id = %s", (victim["id"],)
                )
                code, out = await keel("audit", "verify", "--tenant", tenant, env=env)
                assert code == 1 and str(victim["id"]) in out, out
                assert "changed after it was written" in out, out
            finally:
                # Put it back, so the other tests see an intact log.
                await conn.execute(
                    "UPDATE audit_log SET actor = %s WHERE id = %s",
                    (victim["actor"], victim["id"]),
                )
                await conn.execute("ALTER TABLE audit_log ENABLE TRIGGER ALL")
        code, out = await keel("audit", "verify", "--tenant", tenant, env=env)
        assert code == 0, out


async def test_oversized_bodies_and_bad_tokens_are_refused(
    workspace: Path, keel_app: LaunchKeel
) -> None:
    unused = Script(turns=[Turn(content="unused")])
    async with keel_app(unused, headers={}, worker=False, max_body_bytes=4096) as http:
        big = await http.post(
            "/v1/runs",
            headers=ALICE,
            json={"agent": "review", "input": "x" * 10_000, "workspace": str(workspace)},
        )
        assert big.status_code == 413 and "larger than 4096" in big.text

        async def chunks():  # type: ignore[no-untyped-def]
            for _ in range(10):
                yield b"x" * 1000

        streamed = await http.post(
            "/v1/runs", headers={**ALICE, "content-type": "application/json"}, content=chunks()
        )
        assert streamed.status_code == 413
        for header in ("Bearer", "Basic abc", "Bearer not.a.jwt", ""):
            response = await http.get("/v1/runs", headers={"authorization": header})
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == "Bearer"
        expired = auth_headers("default", "alice")
        from keel.api.identity.auth import dev_token

        old = dev_token(JWT_SECRET, "default", "alice", ttl_s=-120)
        assert (
            await http.get("/v1/runs", headers={"authorization": f"Bearer {old}"})
        ).status_code == 401
        wrong = dev_token("another-secret-0123456789abcdef0123456789", "default", "alice")
        assert (
            await http.get("/v1/runs", headers={"authorization": f"Bearer {wrong}"})
        ).status_code == 401
        import base64
        import json

        def b64(data: dict[str, object]) -> str:
            return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

        header = b64({"alg": "none", "typ": "JWT"})
        claims = b64({"tenant_id": "default", "sub": "x", "exp": 9999999999})
        unsigned = f"{header}.{claims}."
        assert (
            await http.get("/v1/runs", headers={"authorization": f"Bearer {unsigned}"})
        ).status_code == 401
        assert (await http.get("/v1/runs", headers=expired)).status_code == 200
        assert (await http.get("/health")).status_code == 200
