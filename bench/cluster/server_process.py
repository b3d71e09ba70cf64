"""A ``twinlog serve`` process of the benchmark, in its own process group.

Its own group (``start_new_session``) keeps Ctrl-C at the terminal from reaching the
brokers mid-phase: the benchmark decides when each one stops, and ``kill_group``
ends the process and anything it started, whatever happened.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.cluster.waiting import BenchTimeoutError

ROOT = Path(__file__).resolve().parent.parent.parent
SERVING = re.compile(r"serving on \S+:(\d+) ")
START_TIMEOUT_S = 60.0  # a Python broker on two busy cores can take many seconds
STOP_TIMEOUT_S = 30.0
LOG_TAIL_CHARS = 4000


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TWINLOG_TOKEN", None)  # loopback without authentication
    return env


class ServerProcess:
    """One broker: ``start`` (again after a stop), ``kill_group`` (SIGKILL), ``terminate``."""

    def __init__(self, name: str, data_dir: Path, arguments: Sequence[str]) -> None:
        self.name = name
        self.data_dir = data_dir
        self.arguments = list(arguments)
        self.log_path = data_dir.parent / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.address = ""
        self.started_s = 0.0  # monotonic time of the last spawn

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> ServerProcess:
        """Spawn and wait for the "serving on" line. A free port every time: other
        processes on the machine may take a port between a stop and a restart."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log_file:
            self.started_s = time.monotonic()
            self.process = subprocess.Popen(
                [sys.executable, "-m", "twinlog.rpc.cli", "serve", "--data-dir",
                 str(self.data_dir), "--port", "0", *self.arguments],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=ROOT, env=environment(), start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            found = SERVING.search(self.log_path.read_text(errors="replace")[offset:])
            if found:
                self.address = f"127.0.0.1:{found.group(1)}"
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.kill_group()
        raise BenchTimeoutError(f"{self.name} did not start; its log ends:\n{self.log_tail()}")

    def log_tail(self) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]

    def signal(self, signal_number: int) -> None:
        """Send ``signal_number`` to the broker itself (SIGKILL for a crash, SIGTERM for
        a controlled shutdown)."""
        assert self.process is not None and self.process.poll() is None, f"{self.name} is down"
        self.process.send_signal(signal_number)

    def wait_exit(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        assert self.process is not None
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill_group()
            raise BenchTimeoutError(
                f"{self.name} did not exit within {timeout_s:.0f} s; its log ends:\n"
                f"{self.log_tail()}"
            ) from None

    def terminate(self) -> int:
        """SIGTERM (a controlled shutdown on a cluster broker) and wait for the exit."""
        if not self.running:
            return 0
        self.signal(signal.SIGTERM)
        return self.wait_exit()

    def kill_group(self) -> None:
        """SIGKILL the broker's process group; idempotent, never raises."""
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=STOP_TIMEOUT_S)
