"""The producer processes of one deployment, started once and reused for every count.

``ProducerGroup(...)`` starts a process of ``bench.scale.producer`` per transactional id
given (with the credentials' flags given, ``Security.producer_arguments``), each in its own session so that a Ctrl-C at the terminal reaches
only the runner, which stops them. ``run(count, seconds)`` tells the first ``count`` to
go and returns their reports. A reader thread per process queues its stdout lines, so
every wait for a line is bounded; ``close()`` ends stdin (the process exits), waits a
bounded time, kills what is left, and closes every pipe (at once on an error or Ctrl-C:
``close(kill=True)``).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from bench.e2e.runner import ROOT, environment
from bench.scale.settings import ScaleSettings

EXIT_TIMEOUT_S = 30.0
END_OF_OUTPUT = None


def producer_environment() -> dict[str, str]:
    env = environment()
    env.pop("TWINLOG_TOKEN", None)  # a producer presents the token it is given, or none
    return env


class ProducerProcess:
    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, cwd=ROOT, env=producer_environment(), start_new_session=True,
        )  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr_tail: list[str] = []
        self.readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(END_OF_OUTPUT)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr_tail = [*self.stderr_tail[-40:], line.rstrip("\n")]

    def expect(self, prefix: str, deadline_s: float) -> str:
        """The next line starting with ``prefix``, or an error by ``deadline_s`` (monotonic)."""
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline_s - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(
                    f"a producer process did not say {prefix!r} in time:\n" + self.tail()
                ) from None
            if line is END_OF_OUTPUT:
                self.lines.put(END_OF_OUTPUT)
                raise RuntimeError(
                    f"a producer process ended (status {self.process.wait(EXIT_TIMEOUT_S)}) "
                    f"before saying {prefix!r}:\n" + self.tail()
                )
            if line.startswith(prefix):
                return line[len(prefix) :]

    def tail(self) -> str:
        return "\n".join(self.stderr_tail[-20:]) or "(nothing on its stderr)"

    def tell(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def end_input(self) -> None:
        """Close its stdin: it exits once its current count (if any) is done."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except OSError:
                pass  # it is gone already (a broken pipe)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()

    def finish(self) -> None:
        """Wait for the exit (bounded; then kill) and close the pipes."""
        self.end_input()
        try:
            self.process.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for reader in self.readers:
            reader.join(timeout=EXIT_TIMEOUT_S)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


class ProducerGroup:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        transactional_ids: list[str],
        settings: ScaleSettings,
        credentials: Sequence[str] = (),
    ) -> None:
        self.settings = settings
        self.processes: list[ProducerProcess] = []
        try:
            for transactional_id in transactional_ids:
                self.processes.append(ProducerProcess([
                    sys.executable, "-m", "bench.scale.producer", "--bootstrap", bootstrap,
                    "--topic", topic, "--transactional-id", transactional_id,
                    "--records", str(settings.records_per_transaction),
                    "--record-bytes", str(settings.record_bytes),
                    "--partitions", str(settings.partitions),
                    "--warmup", str(settings.warmup_transactions),
                    "--timeout-ms", str(settings.call_timeout_ms), *credentials,
                ]))  # fmt: skip
            deadline_s = time.monotonic() + settings.start_timeout_s
            for process in self.processes:
                process.expect("ready", deadline_s)
        except BaseException:
            self.close(kill=True)
            raise

    def run(self, count: int, seconds: float) -> list[dict[str, Any]]:
        """The first ``count`` processes commit for ``seconds``; their reports."""
        chosen = self.processes[:count]
        for process in chosen:
            process.tell(f"go {seconds}")
        deadline_s = time.monotonic() + self.settings.round_timeout_s
        return [json.loads(process.expect("result ", deadline_s)) for process in chosen]

    def close(self, kill: bool = False) -> None:
        """End every process: at once with ``kill``, else once its count is done."""
        for process in self.processes:
            if kill:
                process.kill()
            else:
                process.end_input()
        for process in self.processes:
            process.finish()

    def __enter__(self) -> ProducerGroup:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self.close(kill=kind is not None)
