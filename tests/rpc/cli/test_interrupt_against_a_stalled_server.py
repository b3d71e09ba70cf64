"""Ctrl-C on a plain ``twinlog produce`` whose server stopped answering (SIGSTOP) says
what it did, whether it was still reaching the server or had sent records: never a
bare "interrupted"."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from process_sockets import wait_connected
from server_process import ROOT, ServerProcess, environment, run_cli

from twinlog.rpc.client import Admin

pytestmark = pytest.mark.slow  # a server, stopped and continued, and CLI processes

LINES = "".join(f"{n}\n" for n in range(50))


def _produce(address: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "twinlog.rpc.cli", "produce", "stalled", "--server", address],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=environment(),
    )


def _wait_for_log_end(address: str, offset: int) -> None:
    deadline = time.monotonic() + 20
    with Admin(address) as admin:
        while admin.describe_topic("stalled").partitions[0].log_end_offset < offset:
            assert time.monotonic() < deadline, "the first records were not delivered"
            time.sleep(0.05)


def _connected_or_killed(producing: subprocess.Popen[str], port: int) -> None:
    try:
        wait_connected(producing.pid, port)
    except AssertionError:
        producing.kill()
        producing.communicate()
        raise


def _interrupt(producing: subprocess.Popen[str]) -> tuple[int, str]:
    producing.send_signal(signal.SIGINT)
    _, stderr = producing.communicate(timeout=10)
    return producing.returncode, stderr


def _send_stalled_and_interrupt(server: ServerProcess, producing: subprocess.Popen[str]) -> str:
    """Stop the server, give ``producing`` more lines, Ctrl-C it: its stderr (exit 130)."""
    assert server.process is not None and producing.stdin is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        producing.stdin.write(LINES)
        producing.stdin.flush()
        time.sleep(2.5)
        status, stderr = _interrupt(producing)
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
    assert status == 130, stderr
    return stderr


def test_interrupted_while_reaching_a_stalled_server(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data") as server:
        assert run_cli("topics", "create", "stalled", "--server", server.address).returncode == 0
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGSTOP)  # stopped before the command starts
        producing = _produce(server.address)
        # Reaching it (the kernel takes the connection for the stopped server): past the
        # imports, which on a busy machine outlast a fixed wait (then a bare "interrupted",
        # the one line for a Ctrl-C while the command starts, was right and the test wrong).
        _connected_or_killed(producing, server.port)
        stderr = _send_stalled_and_interrupt(server, producing)
    assert stderr == (
        f"interrupted while reaching the server at {server.address}: nothing was sent or read\n"
    ), stderr


def test_interrupted_with_records_in_flight_to_a_stalled_server(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data") as server:
        assert run_cli("topics", "create", "stalled", "--server", server.address).returncode == 0
        producing = _produce(server.address)
        assert producing.stdin is not None
        producing.stdin.write(LINES)
        producing.stdin.flush()
        _wait_for_log_end(server.address, 50)  # the first 50 are delivered
        stderr = _send_stalled_and_interrupt(server, producing)
    # The second 50 were read and sent (all of them, unless this machine was very slow).
    assert re.fullmatch(
        r"interrupted: 50 records delivered, 0 not delivered, [1-9]\d* unconfirmed\n", stderr
    ), stderr
