"""The embedded Temporal server starts again when it loses a race for a port."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from keel.worker.dev_stack import TemporalDevServer


def exited_server(tmp_path: Path) -> TemporalDevServer:
    server = TemporalDevServer(db_file=tmp_path / "t.sqlite", port=1, log_file=tmp_path / "t.log")
    server._process = subprocess.Popen([sys.executable, "-c", "pass"])
    server._process.wait()
    return server


def test_a_taken_port_in_this_start_s_output_is_a_lost_race(tmp_path: Path) -> None:
    server = exited_server(tmp_path)
    assert server.log_file is not None
    server.log_file.write_text("an earlier start: bind: address already in use\n")
    start = server._log_size()
    assert not server._lost_a_port_race(start)  # only what this start wrote counts
    with server.log_file.open("a") as out:
        out.write('msg="Failed to start gRPC listener" error="bind: address already in use"\n')
    assert server._lost_a_port_race(start)


def test_other_exits_are_not_retried(tmp_path: Path) -> None:
    server = exited_server(tmp_path)
    assert server.log_file is not None
    server.log_file.write_text("panic: the database file is locked\n")
    assert not server._lost_a_port_race(0)
