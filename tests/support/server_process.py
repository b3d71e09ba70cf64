"""A real ``twinlog serve`` subprocess on a free loopback port, for end-to-end tests.

The server picks its port (``--port 0``) and logs it; its log goes to a file
(so a full pipe can never stall it) that a failing test prints. No tests here.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from checkout import ROOT

SERVING = re.compile(r"serving on (\S+):(\d+) ")
START_TIMEOUT_S = 30.0  # three brokers started side by side on two busy cores


def environment() -> dict[str, str]:
    env = dict(os.environ)
    # The checkout for `python -m tests.workers...`; tests/support for test files run as scripts.
    paths = [str(ROOT), str(ROOT / "tests" / "support"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(path for path in paths if path)
    env.pop("TWINLOG_TOKEN", None)
    return env


class ServerProcess:
    """Thread rule: the test's thread."""

    def __init__(self, data_dir: Path, *arguments: str, log_path: Path | None = None) -> None:
        self.data_dir = data_dir
        self.arguments = list(arguments)
        self.log_path = log_path or data_dir.parent / f"{data_dir.name}-server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.address = ""
        self.port = 0
        self._log_offset = 0  # where this start's lines begin in the log

    def start(self, port: int = 0) -> ServerProcess:
        """Spawn the server and wait until it serves."""
        return self.spawn(port).wait_serving()

    def spawn(self, port: int = 0) -> ServerProcess:
        """Spawn the server; ``wait_serving`` waits for it (a cluster spawns its brokers
        first, so that they start side by side)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log_file = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "twinlog.rpc.cli",
                "serve",
                "--data-dir",
                str(self.data_dir),
                "--port",
                str(port),
                *self.arguments,
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=environment(),
        )
        log_file.close()
        return self

    def wait_serving(self) -> ServerProcess:
        """Wait for the spawned server's "serving on" line (its address then known)."""
        assert self.process is not None, "spawn() first"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            text = self.log_path.read_text(errors="replace")[self._log_offset :]
            found = SERVING.search(text)
            if found:
                self.port = int(found.group(2))
                self.address = f"127.0.0.1:{self.port}"
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        raise AssertionError(f"server did not start; its log:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, signal_number: int = signal.SIGTERM, timeout_s: float = 20.0) -> int:
        """Send the signal and wait; return the exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal_number)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                f"server ignored signal {signal_number}; log:\n{self.log()}"
            ) from None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.stop()


def run_cli(
    *arguments: str, stdin: str = "", timeout_s: float = 60.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "twinlog.rpc.cli", *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment(),
        timeout=timeout_s,
    )
