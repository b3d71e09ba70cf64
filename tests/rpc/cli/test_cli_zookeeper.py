"""``twinlog zookeeper start``: a real ZooKeeper in the foreground, stopped by SIGTERM or
Ctrl-C; a port in use is a clear error."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from server_process import ROOT, environment, run_cli

from twinlog.rpc.cli.local_zookeeper import four_letter_word

START_TIMEOUT_S = 90.0  # a JVM on two busy cores


def _start(data_dir: Path) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "twinlog.rpc.cli",
            "zookeeper",
            "start",
            "--data-dir",
            str(data_dir),
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env=environment(),
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # blocks until the server answers imok, or fails
    found = re.search(r"serving on 127\.0\.0\.1:(\d+)", line)
    if not found:
        with process:  # closes its pipe and waits, once it is killed
            process.kill()
        pytest.fail(f"no 'serving on' line: {line!r}")
    return process, int(found.group(1))


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_start_serves_until_a_signal_stops_it(tmp_path: Path, stop_signal: int) -> None:
    process, port = _start(tmp_path / "zk")
    with process:  # its pipe closed, whatever happens
        try:
            assert four_letter_word(port, "ruok") == "imok"
            process.send_signal(stop_signal)
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
        assert process.stdout is not None
        assert "stopping ZooKeeper" in process.stdout.read()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the JVM went with it: nothing listens any more
        try:
            four_letter_word(port, "ruok", timeout_s=0.5)
        except OSError:
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"ZooKeeper still answers on port {port} after the command stopped")
    assert (tmp_path / "zk" / "data").is_dir()  # its data directory stays for a restart


def test_a_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(
            "zookeeper",
            "start",
            "--data-dir",
            str(tmp_path / "zk"),
            "--port",
            str(port),
            timeout_s=START_TIMEOUT_S,
        )
    assert result.returncode != 0
    assert f"127.0.0.1:{port}" in result.stderr
    assert "did not start" in result.stderr
