"""Serve Keel for the A2A compatibility kit: `python -m tests.a2a_conformance.serve`.

A TEST FIXTURE, never a deployment. It starts an embedded stack (Temporal, Postgres,
the worker and the API) on free ports, like `keel demo`, with the scripted
`conformance` agent of this directory, and prints the commands that run the kit.

AUTH IS OFF (KEEL_AUTH=off): the kit (both its 1.0 and 0.3 lines) sends no
credentials, so Keel trusts every caller as a local admin, and the agent card then
declares no security scheme. Do not expose this port.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import tempfile
from pathlib import Path

import uvicorn

from keel.api.http.app import create_app
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import EmbeddedStack, free_port
from keel.worker.runtime import running_worker
from tests.a2a_conformance.model import ConformanceModel, MessageIdBook, MessageIdRecorder

AGENTS_DIR = Path(__file__).parent / "agents"
AGENT = "conformance"


async def serve(port: int, data_dir: Path) -> None:
    book = MessageIdBook()
    with ConformanceModel(book) as model:
        workspace = data_dir / "workspace"
        workspace.mkdir(parents=True, exist_ok=True)
        settings = Settings().model_copy(
            update={
                "data_dir": data_dir,
                "workspace_root": workspace,
                "agents_dir": AGENTS_DIR,
                # The 0.3 kit calls the URL of the root card, `/a2a`.
                "a2a_default_agent": AGENT,
                "openai_base_url": model.base_url,
                "model": model.script.name,
                "auth_mode": "off",
                "api_host": "127.0.0.1",
                "api_port": port,
                "temporal_port": free_port(),
                "temporal_ui_port": free_port(),
                "api_url": None,
                "public_url": None,
                "temporal_address": None,
                "database_url": None,
            }
        )
        async with EmbeddedStack(settings, ui=False) as stack, running_worker(stack.settings):
            app = MessageIdRecorder(create_app(stack.settings), book)
            server = uvicorn.Server(
                uvicorn.Config(
                    app,
                    host="127.0.0.1",
                    port=port,
                    log_level="warning",
                    lifespan="on",
                    timeout_graceful_shutdown=5,
                )
            )
            base = f"http://127.0.0.1:{port}"
            print(
                f"Keel A2A conformance fixture (AUTH OFF) at {base}, agent '{AGENT}'.\n"
                f"  a2a-tck 1.0-dev: ./run_tck.py --sut-host {base}/a2a/{AGENT} --level must\n"
                f"  a2a-tck 0.3.x:   ./run_tck.py --sut-url {base}/a2a/{AGENT} "
                "--category mandatory\n"
                "Ctrl-C stops it.",
                flush=True,
            )
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, lambda: setattr(server, "should_exit", True))
            await server.serve()


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.a2a_conformance.serve",
        description="Serve Keel with the scripted conformance agent for a2a-tck (auth off).",
    )
    parser.add_argument("--port", type=int, default=0, help="API port; 0 picks a free one")
    parser.add_argument("--data-dir", type=Path, default=None, help="default: a new temp dir")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    port = args.port or free_port()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="keel-a2a-conformance-"))
    asyncio.run(serve(port, data_dir.resolve()))


if __name__ == "__main__":
    main()
