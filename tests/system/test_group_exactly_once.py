"""Exactly-once read-process-write with a consumer group, real processes (issue: consumer
groups, part 3).

Three ``tests.workers.group_transformer`` processes in one group copy topic ``in`` to topic
``out``, each poll in one transaction with the consumed offsets (``group_metadata()``).
Mid-run one member is SIGKILLed (a fourth process takes its place) and another stops
itself (SIGSTOP) between its sends and its offsets: a zombie, mid-transaction. Once the
group has moved its partitions elsewhere the zombie is woken: its offsets are refused by
generation (UnknownMemberIdError or StaleMemberEpochError), it aborts, and joins again.

At the end ``out`` holds every input record exactly once, and the group's committed
offsets are at the end of every input partition.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_process import ROOT, ServerProcess, environment

from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.client import Admin, Consumer, Producer

pytestmark = [pytest.mark.slow]

PARTITIONS = 6
RECORDS = 1_200
GROUP = "transformers"
LINE_TIMEOUT_S = 60.0
FENCED_BY_GENERATION = {"UnknownMemberIdError", "StaleMemberEpochError"}


class Worker:
    """A ``tests.workers.group_transformer`` process whose stdout is read line by line."""

    def __init__(self, server: str, transactional_id: str, *options: str) -> None:
        self.name = transactional_id
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.workers.group_transformer",
                server,
                GROUP,
                transactional_id,
                *options,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=environment(),
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        with self.process.stdout:  # the reader closes the pipe it reads, at its end
            for raw in self.process.stdout:
                self.lines.put(raw.decode(errors="replace").rstrip("\n"))

    def wait_for(self, prefix: str, timeout_s: float = LINE_TIMEOUT_S) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(
            f"{self.name}: no {prefix!r} line; it printed:\n" + "\n".join(self.seen)
        )

    def commits(self) -> int:
        while True:
            try:
                self.seen.append(self.lines.get_nowait())
            except queue.Empty:
                break
        return sum(1 for line in self.seen if line.startswith("committed"))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.reader.join(timeout=LINE_TIMEOUT_S)  # the pipe ends with the process


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with ServerProcess(
        tmp_path / "data",
        "--config",
        "group_heartbeat_interval_ms=300",
        "--config",
        "transaction_check_interval_ms=200",
    ) as running:
        yield running


def committed_total(admin: Admin) -> int:
    return sum(offset for _, offset in admin.describe_group(GROUP).committed)


def test_a_group_copies_exactly_once_through_a_kill_and_a_zombie(server: ServerProcess) -> None:
    with Admin(server.address) as admin:
        admin.create_topic("in", partitions=PARTITIONS)
        admin.create_topic("out", partitions=PARTITIONS)
    with Producer(server.address) as producer:
        for index in range(RECORDS):
            producer.send("in", value=b"%d" % index, partition=index % PARTITIONS)
        producer.flush()
    killed = Worker(server.address, "killed")
    zombie = Worker(server.address, "zombie", "--stop-self-after", "5")
    steady = Worker(server.address, "steady")
    workers = [killed, zombie, steady]
    try:
        # the zombie stops itself mid-transaction after five commits of its own
        zombie_id = zombie.wait_for("member").split()[1]
        killed_id = killed.wait_for("member").split()[1]
        zombie.wait_for("paused")
        # a member dies mid-run; a new process takes its place
        deadline = time.monotonic() + LINE_TIMEOUT_S
        while killed.commits() < 5:
            assert time.monotonic() < deadline, killed.seen
            time.sleep(0.05)
        killed.process.kill()
        killed.process.wait()
        replacement = Worker(server.address, "replacement")
        workers.append(replacement)
        # the others go on without both (sessions of 3 s expire), then the zombie wakes
        with Admin(server.address) as admin:
            deadline = time.monotonic() + LINE_TIMEOUT_S
            while True:
                description = admin.describe_group(GROUP)
                members = {m.member_id for m in description.members}
                if not members & {zombie_id, killed_id} and description.state == "stable":
                    break
                assert time.monotonic() < deadline, description
                time.sleep(0.1)
            before = committed_total(admin)
            while committed_total(admin) <= before:  # its partitions are read by others
                assert time.monotonic() < deadline, admin.describe_group(GROUP)
                time.sleep(0.1)
        zombie.process.send_signal(signal.SIGCONT)
        fenced = zombie.wait_for("fenced")
        assert fenced.split()[1] in FENCED_BY_GENERATION, fenced
        # everything is copied in the end (the woken zombie joins again and helps)
        with Admin(server.address) as admin:
            deadline = time.monotonic() + 120
            while committed_total(admin) < RECORDS:
                assert time.monotonic() < deadline, admin.describe_group(GROUP)
                time.sleep(0.2)
            offsets = dict(admin.describe_group(GROUP).committed)
        assert offsets == {
            TopicPartition("in", p): RECORDS // PARTITIONS for p in range(PARTITIONS)
        }
    finally:
        for worker in workers:
            worker.stop()
    copied: Counter[bytes | None] = Counter()
    with Consumer(server.address, auto_offset_reset="earliest", enable_auto_commit=False) as reader:
        reader.assign([("out", p) for p in range(PARTITIONS)])
        ends = reader.end_offsets([TopicPartition("out", p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 30
        while sum(copied.values()) < sum(ends.values()):
            assert time.monotonic() < deadline
            copied.update(r.value for r in reader.poll(timeout_ms=200))
    duplicates = {value: count for value, count in copied.items() if count > 1}
    assert not duplicates, f"records copied more than once: {sorted(duplicates)[:10]}"
    assert set(copied) == {b"%d" % i for i in range(RECORDS)}
