"""``twinlog demo --cluster`` as a user runs it: a local ZooKeeper and three broker
processes, the coordinator's broker SIGKILLed in the middle of a commit (a failpoint),
the commit answered by the new coordinator, and the check that a vanilla consumer reads
every committed record exactly once; and Ctrl-C stopping all of it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from server_process import ROOT, environment

pytestmark = [
    pytest.mark.slow,
    pytest.mark.crash,
    pytest.mark.skipif(shutil.which("java") is None, reason="the local ZooKeeper needs Java 17"),
]

# The demo takes about 15 s; the bound only catches a hang on a slow, shared machine.
DEMO_TIMEOUT_S = 180


def _demo(data_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "twinlog.rpc.cli", "demo", "--cluster", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=environment(),
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )  # fmt: skip


def test_the_coordinator_dies_mid_commit_and_every_commit_is_read_once(tmp_path: Path) -> None:
    started_s = time.monotonic()
    process = _demo(tmp_path / "demo")
    try:
        output, _ = process.communicate(timeout=DEMO_TIMEOUT_S)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    print(f"twinlog demo --cluster took {time.monotonic() - started_s:.1f} s")
    assert process.returncode == 0, output
    killed = re.search(r"broker (\d), the coordinator, is killed in the middle", output)
    assert killed is not None, output
    assert f"broker {killed.group(1)} killed itself (SIGKILL)" in output, output
    new = re.search(r"found the new coordinator, broker (\d)", output)
    assert new is not None and new.group(1) != killed.group(1), output
    assert "kill -> commit answered" in output, output
    assert "every committed record exactly once" in output, output
    assert "nothing of the aborted transaction" in output, output
    assert "CHECK FAILED" not in output
    for broker_id in (1, 2, 3):
        assert f"broker {broker_id} stopped (status 0)" in output, output
    assert "ZooKeeper stopped" in output
    assert not (tmp_path / "demo" / "crash-coordinator").exists()


def test_ctrl_c_stops_the_brokers_and_zookeeper(tmp_path: Path) -> None:
    process = _demo(tmp_path / "demo")
    assert process.stdout is not None
    lines: list[str] = []
    try:
        deadline_s = time.monotonic() + DEMO_TIMEOUT_S
        while time.monotonic() < deadline_s:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("3. transactions"):
                break
        assert lines and lines[-1].startswith("3. transactions"), "".join(lines)
        os.killpg(process.pid, signal.SIGINT)  # as the terminal's Ctrl-C
        output, _ = process.communicate(timeout=DEMO_TIMEOUT_S)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    output = "".join(lines) + output
    assert process.returncode == 130, output
    assert "Traceback" not in output
    for broker_id in (1, 2, 3):
        assert f"broker {broker_id} stopped (status 0)" in output, output
        log = (tmp_path / "demo" / f"broker-{broker_id}.log").read_text()
        assert "stopped cleanly" in log, log[-3000:]
    assert "ZooKeeper stopped\n   (all stopped in" in output, output
