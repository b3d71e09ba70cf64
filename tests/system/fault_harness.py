"""Fault harness: a real ``twinlog serve`` killed over and over under a transactional workload.

    .venv/bin/python tests/system/fault_harness.py --minutes 10 [--seed S] [--work-dir D]
    .venv/bin/python tests/system/fault_harness.py --kills 30          # what CI runs (tests/test_fault_harness.py)

The server runs as a subprocess on one fixed port, so clients reconnect to it
across restarts. In this process a workload runs in threads:

- several transactional producers (distinct transactional ids), each value
  unique and self-describing (``T|p<producer>|t<txn>|<partition>|<i>|`` then
  random bytes up to a random size), a random subset of partitions per
  transaction, ~20% aborted on purpose, a few left to time out, a few
  committed by a zombie after a newer producer fenced it;
- one plain (idempotent, non-transactional) producer of unique values;
- with ``--acl`` (the default; ``harness_security``), the server requires tokens and
  ACLs: the producers above act as principal ``victim`` (one transactional producer
  commits offsets of group ``victims`` in each transaction), and an attacker (another
  principal, READ on the topics, WRITE on the victims' topic, its own transactional
  id) keeps trying to reach the victims' group and producer ids across the kills.

Each producer writes down what the client was told: a transaction is
COMMITTED (commit returned OK), ABORTED (abort returned OK, or the commit was
never sent, or the server answered that it aborted / fenced it), or UNKNOWN
(the commit request failed without an answer, e.g. the connection died during
CommitTransaction). Producers retry as the client's error classes say (the
client retries ``retriable`` errors itself) and, on a fatal or unknown outcome,
re-create their Producer (new init_transactions) and go on, as an application
would.

The killer (this process's main thread) alternates two kinds of server life:
a random one (SIGKILL after a random time, sometimes during start-up
recovery), and one armed with a named failpoint (``TWINLOG_FAILPOINTS=name=crash@K``,
cycling through every ``failpoints.hit(...)`` name found in engine/, journal/
and copier/) that kills itself there. After every death the server restarts
on the same data directory.

At the end the server restarts clean, every producer finishes, the harness
waits until no transaction is in flight, SIGKILLs once more, restarts, and
reads every partition from offset 0, and group ``victims``' offset (the number of the
transaction that sent it: one the client was not told aborted, and none older than the
last acknowledged commit). The checker (``check``) compares the logs
with what clients were told:

    lost write          an acknowledged commit (or acknowledged plain record) is missing
    aborted read        a value of an aborted, timed-out or never-committed transaction is present
    duplicate           a value is present more than once
    torn transaction    a transaction's values in a partition are not contiguous, or not in send order
    not atomic          an unknown-outcome transaction is partly present (must be all or nothing)
    non-dense offsets   a partition's offsets are not 0, 1, 2, ... in order
    foreign value       a value no client sent to that partition
    zombie commit       a producer's commit returned OK after a newer generation fenced it
    isolation breach    an attack of the attacker was accepted (each must be refused)
    server failure      the server exited on its own without a failpoint, or could not start

and prints a summary table. Exit status 0 when no anomaly was found.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from twinlog.engine.base.errors import (
    AuthorizationError,
    InvalidConfigError,
    InvalidTxnStateError,
    ProducerFencedError,
    TopicExistsError,
    TwinlogError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.group_offsets import NO_OFFSET
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.rpc.client import Admin, Producer, RetryPolicy
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.futures import RecordFuture
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.client.retry import call_with_retry

if __name__ == "__main__":  # run as a script: find the test helpers
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from checkout import ROOT
from harness_security import (
    ATTACKER,
    ATTACKS,
    OPERATOR,
    VICTIM,
    VICTIM_GROUP,
    Attacker,
    AttackTally,
    Security,
)

log = logging.getLogger("twinlog.client.harness")  # beside the client's retries in client.log
TOPIC = "fault"
FAILPOINT_CALL = re.compile(r"""failpoints\.hit\(\s*["']([^"']+)["']\s*\)""")
FAILPOINT_PACKAGES = ("engine", "journal", "copier")
# Log compaction runs on compacted topics only (keyed records); this workload writes none,
# so its points are never passed. tests/test_log_compaction*.py kill a process at each.
# A coordinator's replicated journal append runs on cluster brokers only: the cluster's
# F7 test (tests/system/cluster/test_f07_f08_coordinator_kill.py) kills one there.
UNREACHED_PREFIXES = ("compaction.", "coordinator.journal_appended")
SERVING = re.compile(r"serving on (\S+):(\d+) ")
START_TIMEOUT_S = 30.0
ZOMBIE_ACCEPTED = "ZOMBIE COMMIT ACCEPTED"
LATE_COMMIT = "late commit"  # committed though its client slept past the transaction timeout

# What a client was told about a transaction.
OPEN = "open"  # begun, its commit never sent (yet)
COMMITTED = "committed"
ABORTED = "aborted"
UNKNOWN = "unknown"

# Anomaly classes, in the order the summary prints them.
ANOMALY_CLASSES = (
    "lost write",
    "aborted read",
    "duplicate",
    "torn transaction",
    "not atomic",
    "non-dense offsets",
    "foreign value",
    "zombie commit",
    "late commit",
    "isolation breach",
    "server failure",
)


class ServerGone(Exception):
    """The server cannot be started any more: the run stops early and reports it."""


def failpoint_names(root: Path = ROOT) -> list[str]:
    """Every failpoint name in the broker's code (``failpoints.hit("...")``) that this
    workload passes through, sorted."""
    names: set[str] = set()
    for package in FAILPOINT_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if path.name == "failpoints.py":
                continue  # its docstring's example is not a point
            names.update(FAILPOINT_CALL.findall(path.read_text(encoding="utf-8")))
    return sorted(name for name in names if not name.startswith(UNREACHED_PREFIXES))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- history: what the clients were told ----------------------------------------------------


@dataclass
class Transaction:
    """One transaction as its client saw it: values per partition in send order, its outcome."""

    producer: str
    number: int
    values: dict[int, list[bytes]] = field(default_factory=dict)
    outcome: str = OPEN
    reason: str = ""  # why ABORTED / UNKNOWN: "abort", "timeout", "fenced", "send failed", ...
    transaction_id: int = -1  # the broker's id (to find it in the server log)
    began_s: float = field(default_factory=time.monotonic)  # when begin returned
    ended_s: float = 0.0  # when the commit call returned
    group_offset: int | None = None  # the offset it sent for group ``victims``, if any

    @property
    def name(self) -> str:
        suffix = f" (id {self.transaction_id})" if self.transaction_id >= 0 else ""
        return f"{self.producer}/t{self.number}{suffix}"

    def value_count(self) -> int:
        return sum(len(values) for values in self.values.values())


@dataclass
class PlainWrite:
    """One record of the plain producer: acknowledged (future OK) or not (outcome unknown)."""

    value: bytes
    partition: int
    acknowledged: bool


# --- the checker --------------------------------------------------------------------------


@dataclass
class CheckReport:
    anomalies: dict[str, list[str]] = field(
        default_factory=lambda: {name: [] for name in ANOMALY_CLASSES}
    )
    records_checked: int = 0
    unknown_present: int = 0  # unknown-outcome transactions found whole (they committed)
    unknown_absent: int = 0  # ... found absent (they aborted)

    def add(self, kind: str, message: str) -> None:
        self.anomalies[kind].append(message)

    @property
    def total(self) -> int:
        return sum(len(found) for found in self.anomalies.values())


def _short(value: bytes | None) -> str:
    if value is None:
        return "<null>"
    head = value.split(b"|", 5)
    return repr(b"|".join(head[:5]) if len(head) > 5 else value[:48])


def check(
    transactions: Iterable[Transaction],
    plain: Iterable[PlainWrite],
    logs: Mapping[int, Sequence[tuple[int, bytes | None]]],
    log_starts: Mapping[int, int] | None = None,
    group_offset: int | None = None,
    breaches: Sequence[str] = (),
) -> CheckReport:
    """Compare the partitions' logs (``partition -> [(offset, value)]`` from offset 0) with
    what the clients were told; every anomaly found, by class. ``group_offset`` is group
    ``victims``' committed offset read back (None: not read), ``breaches`` the attacks that
    were accepted."""
    report = CheckReport()
    for breach in breaches:
        report.add("isolation breach", breach)
    transactions = list(transactions)
    plain = list(plain)
    owner: dict[bytes, int] = {}  # value -> the partition it was sent to
    for txn in transactions:
        for partition, values in txn.values.items():
            for value in values:
                owner[value] = partition
    for write in plain:
        owner[write.value] = write.partition

    # where each value is: (partition, index in that partition's log)
    places: dict[bytes | None, list[tuple[int, int]]] = defaultdict(list)
    for partition, records in sorted(logs.items()):
        start = (log_starts or {}).get(partition, 0)
        if start != 0:
            report.add(
                "non-dense offsets", f"partition {partition}: the log starts at {start}, not 0"
            )
        wrong = [(i, offset) for i, (offset, _) in enumerate(records) if offset != start + i]
        if wrong:
            index, offset = wrong[0]
            report.add(
                "non-dense offsets",
                f"partition {partition}: record #{index} has offset {offset}, expected "
                f"{start + index} ({len(wrong)} records out of place)",
            )
        for index, (_, value) in enumerate(records):
            places[value].append((partition, index))
        report.records_checked += len(records)

    for value, found in places.items():
        if len(found) > 1:
            report.add("duplicate", f"{_short(value)} is present {len(found)} times at {found}")
        sent_to = owner.get(value) if value is not None else None
        if sent_to is None:
            report.add("foreign value", f"{_short(value)} at {found[0]} was never sent")
        elif any(partition != sent_to for partition, _ in found):
            report.add(
                "foreign value",
                f"{_short(value)} was sent to partition {sent_to}, found at {found}",
            )

    def index_in(partition: int, value: bytes) -> int | None:
        for found_partition, index in places.get(value, ()):
            if found_partition == partition:
                return index
        return None

    present_whole: set[str] = set()  # transactions of unknown outcome found whole
    for txn in transactions:
        sent = txn.value_count()
        present = 0
        for partition, values in sorted(txn.values.items()):
            indexes = [index_in(partition, value) for value in values]
            seen = [index for index in indexes if index is not None]
            present += len(seen)
            if not seen:
                continue
            if seen != sorted(seen):
                report.add(
                    "torn transaction",
                    f"{txn.name} ({txn.outcome}): its values in partition {partition} are out of "
                    f"send order (log positions {seen})",
                )
            elif seen[-1] - seen[0] + 1 != len(seen):
                report.add(
                    "torn transaction",
                    f"{txn.name} ({txn.outcome}): its {len(seen)} values in partition "
                    f"{partition} are not contiguous (log positions {seen[0]}..{seen[-1]})",
                )
        if txn.outcome == COMMITTED and present < sent:
            report.add(
                "lost write",
                f"{txn.name} was acknowledged committed; {sent - present} of its {sent} values "
                f"are missing ({_missing(txn, index_in)})",
            )
        elif txn.outcome in (ABORTED, OPEN) and present:
            what = "aborted" if txn.outcome == ABORTED else "never committed"
            report.add(
                "aborted read",
                f"{txn.name} was {what} ({txn.reason or 'no commit sent'}); {present} of its "
                f"{sent} values are present",
            )
        elif txn.outcome == UNKNOWN:
            if present == sent:
                report.unknown_present += 1
                present_whole.add(txn.name)
            elif present == 0:
                report.unknown_absent += 1
            else:
                report.add(
                    "not atomic",
                    f"{txn.name} (outcome unknown: {txn.reason}) is partly present: {present} of "
                    f"{sent} values ({_missing(txn, index_in)})",
                )

    for write in plain:
        if write.acknowledged and index_in(write.partition, write.value) is None:
            report.add(
                "lost write",
                f"plain record {_short(write.value)} to partition {write.partition} was "
                "acknowledged and is missing",
            )
    if group_offset is not None:
        _check_group_offset(report, transactions, group_offset, present_whole)
    return report


def _check_group_offset(
    report: CheckReport,
    transactions: Sequence[Transaction],
    offset: int,
    present_whole: set[str],
) -> None:
    """Group ``victims``' offset is the number of the transaction that sent it: that one
    committed (acknowledged, or unknown and found whole), and no later one was acknowledged."""
    senders = {txn.group_offset: txn for txn in transactions if txn.group_offset is not None}
    acknowledged = [n for n, txn in senders.items() if txn.outcome == COMMITTED]
    latest = max(acknowledged, default=NO_OFFSET)
    what = f"group {VICTIM_GROUP!r} has offset {offset}"
    txn = senders.get(offset)
    if offset == NO_OFFSET:
        if latest != NO_OFFSET:
            report.add("lost write", f"{what}; {senders[latest].name} committed {latest}")
    elif txn is None:
        report.add("foreign value", f"{what}, which no transaction sent")
    elif txn.outcome in (ABORTED, OPEN) or (
        txn.outcome == UNKNOWN and txn.name not in present_whole
    ):
        report.add("aborted read", f"{what}, sent by {txn.name} ({txn.outcome}, {txn.reason})")
    elif offset < latest:
        report.add(
            "lost write",
            f"{what}; {senders[latest].name} committed offset {latest} (acknowledged)",
        )


def _missing(txn: Transaction, index_in: Callable[[int, bytes], int | None]) -> str:
    parts = []
    for partition, values in sorted(txn.values.items()):
        missing = sum(1 for value in values if index_in(partition, value) is None)
        parts.append(f"p{partition}: {len(values) - missing}/{len(values)}")
    return ", ".join(parts)


# --- the server process --------------------------------------------------------------------


class ServerProcess:
    """``python -m twinlog.rpc.cli serve`` on a fixed port; its output appended to one log file.

    Thread rule: the killer's thread.
    """

    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        port: int,
        config: Sequence[str],
        arguments: Sequence[str] = (),
    ) -> None:
        self.data_dir = data_dir
        self.arguments = list(arguments)  # --tokens-file, --acl-file
        self.log_path = log_path
        self.port = port
        self.address = f"127.0.0.1:{port}"
        self.config = list(config)
        self.process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0
        self.starts = 0
        self.start_times_s: list[float] = []  # time.monotonic() of each spawn

    def spawn(self, failpoints: str | None = None) -> None:
        assert self.process is None or self.process.poll() is not None, "server still running"
        environment = dict(os.environ)
        environment["PYTHONPATH"] = str(ROOT) + os.pathsep + environment.get("PYTHONPATH", "")
        environment.pop("TWINLOG_TOKEN", None)
        environment.pop("TWINLOG_FAILPOINTS", None)
        if failpoints:
            environment["TWINLOG_FAILPOINTS"] = failpoints
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log_file:
            self._log_offset = log_file.tell()
            log_file.write(
                f"--- harness: start #{self.starts + 1}, failpoints {failpoints or 'none'}\n".encode()
            )
            log_file.flush()
            command = [
                sys.executable,
                "-m",
                "twinlog.rpc.cli",
                "serve",
                "--data-dir",
                str(self.data_dir),
            ]
            command += ["--port", str(self.port)]
            for item in self.config:
                command += ["--config", item]
            command += self.arguments
            self.process = subprocess.Popen(
                command, stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT, env=environment
            )
        self.starts += 1
        self.start_times_s.append(time.monotonic())

    def wait_serving(self, timeout_s: float = START_TIMEOUT_S) -> bool:
        """True once the server logs that it serves; False if it exited first."""
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if SERVING.search(self.log_since_start()):
                return True
            if self.process.poll() is not None:
                return bool(SERVING.search(self.log_since_start()))
            time.sleep(0.02)
        self.kill()
        return False

    def log_since_start(self) -> str:
        with self.log_path.open("rb") as log_file:
            log_file.seek(self._log_offset)
            return log_file.read().decode(errors="replace")

    def wait_exit(self, timeout_s: float) -> int | None:
        """The exit status once it exits within ``timeout_s``, else None."""
        assert self.process is not None
        try:
            return self.process.wait(timeout=max(0.0, timeout_s))
        except subprocess.TimeoutExpired:
            return None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL (a real kill -9) and reap."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM (graceful) and wait; the exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return -signal.SIGKILL


# --- the workload -------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadSettings:
    partitions: int = 4
    records_per_partition_max: int = 4
    abort_probability: float = 0.2
    timeout_probability: float = 0.02  # begin, send, then wait past the transaction timeout
    zombie_probability: float = 0.02  # fence the producer with a new one, then commit with the old
    # Of commits: send CommitTransaction once, without the client's retries, so that a kill
    # during the call leaves the outcome unknown (to be resolved by reading: all or nothing).
    impatient_commit_probability: float = 0.3
    # Of those: with a deadline about as long as a commit takes (drawn from this range), so
    # the client gives up while the server may or may not commit: an unknown outcome
    # without a kill, resolved by reading like any other.
    hasty_commit_probability: float = 0.3
    hasty_deadline_ms: tuple[float, float] = (0.05, 1.0)
    transaction_timeout_ms: int = 3_000
    retry_timeout_ms: int = 20_000  # the client's own retry budget per call
    request_timeout_ms: int = 10_000
    plain_batch_max: int = 8


def random_size(rng: random.Random) -> int:
    """Value sizes: mostly small, some of a few KiB, now and then tens of KiB."""
    draw = rng.random()
    if draw < 0.6:
        return rng.randint(0, 100)
    if draw < 0.95:
        return rng.randint(100, 4_096)
    return rng.randint(4_096, 48 * 1024)


def make_value(prefix: str, rng: random.Random) -> bytes:
    head = prefix.encode()
    return head + rng.randbytes(max(0, random_size(rng) - len(head)))


class Worker(threading.Thread):
    """Base of the producer threads: a stop event, a seeded random, errors kept for the report."""

    def __init__(
        self,
        name: str,
        address: str,
        settings: WorkloadSettings,
        seed: int,
        token: str | None = None,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.address = address
        self.token = token  # the principal it acts as (None: the server asks for none)
        self.settings = settings
        self.rng = random.Random(seed)
        self.stopping = threading.Event()
        self.error: str | None = None  # a bug of the harness (or an unexpected client exception)

    def run(self) -> None:
        try:
            self.work()
        except BaseException:
            self.error = traceback.format_exc()

    def work(self) -> None:
        raise NotImplementedError

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(timeout_ms=self.settings.retry_timeout_ms)


class TransactionalWorker(Worker):
    def __init__(
        self,
        index: int,
        address: str,
        settings: WorkloadSettings,
        seed: int,
        token: str | None = None,
    ) -> None:
        super().__init__(f"txn-producer-{index}", address, settings, seed, token)
        self.label = f"p{index}"
        self.transactional_id = f"fault-harness-{index}"
        # The first one consumes as group ``victims``: each transaction sends the group's
        # offset (its own number), so the attacker has a group to aim at.
        self.sends_group_offsets = index == 0
        self.transactions: list[Transaction] = []
        self.resets = 0  # Producers re-created (fatal error, unknown outcome, fencing test)

    def new_producer(self) -> Producer | None:
        """A Producer with this worker's transactional id, initialised; None once stopping."""
        while not self.stopping.is_set():
            producer = Producer(
                self.address,
                transactional_id=self.transactional_id,
                linger_ms=2,
                delivery_timeout_ms=self.settings.retry_timeout_ms,
                transaction_timeout_ms=self.settings.transaction_timeout_ms,
                retry=self.retry_policy(),
                request_timeout_ms=self.settings.request_timeout_ms,
                token=self.token,
            )
            try:
                producer.init_transactions()
                return producer
            except AuthorizationError:
                close_quietly(producer)
                raise  # the harness's grants are wrong: retrying will not help
            except TwinlogError:
                close_quietly(producer)
                time.sleep(0.2)
        return None

    def work(self) -> None:
        producer: Producer | None = None
        number = 0
        while not self.stopping.is_set():
            if producer is None:
                producer = self.new_producer()
                if producer is None:
                    return
            number += 1
            if not self.one_transaction(producer, number):
                close_quietly(producer)
                producer = None
                self.resets += 1
        if producer is not None:
            close_quietly(producer)

    def one_transaction(self, producer: Producer, number: int) -> bool:
        """Run one transaction; False when the producer must be re-created."""
        rng = self.rng
        try:
            transaction_id = producer.begin_transaction()
        except TwinlogError:
            return False  # nothing was sent in it: nothing to check
        txn = Transaction(self.label, number, transaction_id=transaction_id)
        self.transactions.append(txn)
        chosen = rng.sample(
            range(self.settings.partitions), rng.randint(1, self.settings.partitions)
        )
        plan = [
            partition
            for partition in chosen
            for _ in range(rng.randint(1, self.settings.records_per_partition_max))
        ]
        rng.shuffle(plan)  # interleaved across partitions; send order per partition is kept
        futures: list[RecordFuture] = []
        send_failed = False
        for partition in plan:
            values = txn.values.setdefault(partition, [])
            value = make_value(f"T|{self.label}|t{number}|{partition}|{len(values)}|", rng)
            try:
                futures.append(producer.send(TOPIC, value, partition=partition))
            except TwinlogError:
                send_failed = True
                break
            values.append(value)
        txn.values = {p: v for p, v in txn.values.items() if v}
        if self.sends_group_offsets and not send_failed:
            txn.group_offset = number  # before the call: its outcome may be unknown
            try:
                producer.send_offsets_to_transaction(
                    {TopicPartition(TOPIC, 0): number}, VICTIM_GROUP
                )
            except TwinlogError:
                send_failed = True
        try:
            producer.flush()
        except TwinlogError:
            send_failed = True
        if any(future.exception(timeout=120) is not None for future in futures):
            send_failed = True
        draw = rng.random()
        if send_failed or draw < self.settings.abort_probability:
            return self.abort(producer, txn, "send failed" if send_failed else "abort")
        draw -= self.settings.abort_probability
        if draw < self.settings.timeout_probability:
            time.sleep(self.settings.transaction_timeout_ms / 1000 + 1.6)
            return self.commit(producer, txn, expect_timeout=True)
        draw -= self.settings.timeout_probability
        if draw < self.settings.zombie_probability:
            return self.zombie_commit(producer, txn)
        impatient = rng.random() < self.settings.impatient_commit_probability
        hasty = impatient and rng.random() < self.settings.hasty_commit_probability
        return self.commit(producer, txn, impatient=impatient, hasty=hasty)

    def abort(self, producer: Producer, txn: Transaction, reason: str) -> bool:
        # The commit was never sent: whatever happens now, nothing of it may appear.
        txn.outcome, txn.reason = ABORTED, reason
        try:
            producer.abort_transaction()
            return True
        except TwinlogError as error:
            txn.reason = f"{reason}, abort failed: {type(error).__name__}"
            return False

    def commit(
        self,
        producer: Producer,
        txn: Transaction,
        expect_timeout: bool = False,
        impatient: bool = False,
        hasty: bool = False,
    ) -> bool:
        txn.outcome, txn.reason = UNKNOWN, "commit in progress"
        log.debug("commit %s: sending%s", txn.name, " once" if impatient else "")
        patient = producer.retry
        broker = producer._broker  # the remote broker behind the client: its call deadline
        deadline_s = getattr(broker, "timeout_s", None)
        try:
            if impatient:
                producer.flush()  # the sends keep their retries; only the commit is one-shot
                # One attempt: the first retry's pause (40 ms or more) is already past
                # a 1 ms budget. (0 is refused since the policy's rules check it: for a
                # while every impatient commit failed there and counted as "unknown".)
                producer.retry = RetryPolicy(timeout_ms=1)
            if hasty and deadline_s is not None:
                broker.timeout_s = self.rng.uniform(*self.settings.hasty_deadline_ms) / 1000
            producer.commit_transaction()
        except ProducerFencedError:
            txn.outcome, txn.reason = ABORTED, "fenced"
        except InvalidTxnStateError as error:
            if said_aborted(error):
                txn.outcome = ABORTED
                txn.reason = "timed out" if expect_timeout else "aborted by the server"
            else:
                txn.reason = f"{type(error).__name__}: {error}"
        except InvalidConfigError:
            raise  # the harness's own call was wrong: a worker error, never an outcome
        except TwinlogError as error:
            txn.reason = f"{type(error).__name__}: {str(error)[:160]}"
        else:
            txn.outcome, txn.reason = COMMITTED, LATE_COMMIT if expect_timeout else ""
        finally:
            producer.retry = patient
            if deadline_s is not None:
                broker.timeout_s = deadline_s
            txn.ended_s = time.monotonic()
        log.debug("commit %s: %s %s", txn.name, txn.outcome, txn.reason)
        return txn.outcome == COMMITTED

    def zombie_commit(self, producer: Producer, txn: Transaction) -> bool:
        """Fence ``producer`` with a new producer of the same id, then commit with the old one.

        Returns False always: the caller re-creates the producer (the new one is closed here,
        so that the next transaction runs the normal re-initialisation path).
        """
        fenced = False
        successor = Producer(
            self.address,
            transactional_id=self.transactional_id,
            retry=self.retry_policy(),
            transaction_timeout_ms=self.settings.transaction_timeout_ms,
            request_timeout_ms=self.settings.request_timeout_ms,
            token=self.token,
        )
        try:
            successor.init_transactions()
            fenced = True
        except TwinlogError:
            pass
        finally:
            close_quietly(successor)
        txn.outcome, txn.reason = UNKNOWN, "zombie commit in progress"
        try:
            producer.commit_transaction()
        except TwinlogError as error:
            if fenced or isinstance(error, ProducerFencedError) or said_aborted(error):
                # The newer generation's init returned: the server promised this one aborted.
                txn.outcome, txn.reason = ABORTED, "fenced"
            else:
                txn.reason = f"zombie: {type(error).__name__}"
            return False
        txn.outcome = COMMITTED
        if fenced:
            txn.reason = ZOMBIE_ACCEPTED
        return False


def said_aborted(error: TwinlogError) -> bool:
    """Does the server's answer say the transaction is aborted (``it is ABORTED``)?"""
    return isinstance(error, InvalidTxnStateError) and bool(
        re.search(r"it is (ABORTED|PREPARE_ABORT)\b", str(error))
    )


def close_quietly(producer: Producer) -> None:
    with contextlib.suppress(Exception):
        producer.close(timeout_ms=2_000)


class PlainWorker(Worker):
    """Idempotent non-transactional produce of unique values; acknowledged or unknown."""

    def __init__(
        self, address: str, settings: WorkloadSettings, seed: int, token: str | None = None
    ) -> None:
        super().__init__("plain-producer", address, settings, seed, token)
        self.writes: list[PlainWrite] = []

    def work(self) -> None:
        rng = self.rng
        producer = Producer(
            self.address,
            linger_ms=2,
            delivery_timeout_ms=self.settings.retry_timeout_ms,
            retry=self.retry_policy(),
            request_timeout_ms=self.settings.request_timeout_ms,
            token=self.token,
        )
        number = 0
        try:
            while not self.stopping.is_set():
                pending: list[tuple[bytes, int, RecordFuture | None]] = []
                for _ in range(rng.randint(1, self.settings.plain_batch_max)):
                    number += 1
                    partition = rng.randrange(self.settings.partitions)
                    value = make_value(f"P|plain|n{number}|{partition}|", rng)
                    try:
                        future: RecordFuture | None = producer.send(
                            TOPIC, value, partition=partition
                        )
                    except TwinlogError:
                        future = None  # not queued: never sent
                    pending.append((value, partition, future))
                for value, partition, sent in pending:
                    if sent is None:
                        continue
                    acknowledged = sent.exception(timeout=120) is None
                    self.writes.append(PlainWrite(value, partition, acknowledged))
                time.sleep(rng.uniform(0.0, 0.05))
        finally:
            close_quietly(producer)


# Between the attacker's rounds: often enough that every attack meets every kind of server
# life, rare enough that the victims' workload (and the run's length) barely changes.
ATTACK_PAUSE_S = (0.3, 0.8)


class AttackerWorker(Worker):
    """Another principal trying every attack of ``harness_security.ATTACKS``, round after
    round, across the kills; what each got is in ``attacker.tally``."""

    def __init__(self, address: str, settings: WorkloadSettings, seed: int, token: str) -> None:
        super().__init__("attacker", address, settings, seed, token)
        self.attacker = Attacker(TOPIC, settings.partitions, settings.transaction_timeout_ms)

    def work(self) -> None:
        options = ConnectionOptions(token=self.token, request_timeout_ms=5_000)
        with RemoteBroker(self.address, options) as remote:
            while not self.stopping.is_set():
                self.attacker.round(remote, self.rng)
                self.stopping.wait(self.rng.uniform(*ATTACK_PAUSE_S))


# --- the run ------------------------------------------------------------------------------


@dataclass(frozen=True)
class HarnessConfig:
    work_dir: Path
    seed: int = 1
    kills: int = 30  # at least this many kills, and every failpoint reached at least once
    minutes: float | None = None  # long mode: kill for this long instead (and cover failpoints)
    max_seconds: float = 600.0  # stop killing after this long whatever the counts say
    producers: int = 3
    plain_producer: bool = True
    life_s: tuple[float, float] = (0.3, 2.5)  # a random life: SIGKILL after this long serving
    startup_kill_probability: float = 0.1  # of random lives: SIGKILL during start-up instead
    graceful_probability: float = 0.1  # of random lives: SIGTERM (a clean stop) instead
    failpoint_hits_max: int = 10  # failpoint lives: crash@K with K in 1..this
    failpoint_wait_s: float = 12.0  # a failpoint not reached by then: SIGKILL anyway
    workload: WorkloadSettings = field(default_factory=WorkloadSettings)
    server_config: tuple[str, ...] = (
        "checkpoint_interval_ms=1000",
        "transaction_check_interval_ms=500",
        "shutdown_grace_ms=2000",  # a graceful stop waits this long for open produce streams
    )
    progress: bool = False  # print a line every ~30 s
    # "acl": tokens, ACLs and the attacker (CI); "tokens": the same without the ACL file, so
    # every attack succeeds (to see the checker catch them); "off": no security, no attacker.
    security: str = "acl"


SECURITY_MODES = ("acl", "tokens", "off")


@dataclass
class RunResult:
    seed: int
    seconds: float
    kills: Counter[str]
    graceful_stops: int
    failpoints: list[str]
    failpoints_reached: set[str]
    transactions: list[Transaction]
    producer_resets: int
    plain: list[PlainWrite]
    report: CheckReport
    worker_errors: list[str]
    work_dir: Path
    server_log: Path
    attacks: AttackTally | None = None  # None: no attacker ran

    @property
    def kill_count(self) -> int:
        return sum(self.kills.values())

    def outcome_count(self, outcome: str) -> int:
        return sum(1 for txn in self.transactions if txn.outcome == outcome)

    @property
    def anomaly_count(self) -> int:
        return self.report.total

    @property
    def ok(self) -> bool:
        return self.anomaly_count == 0 and not self.worker_errors

    def summary(self) -> str:
        return format_summary(self)


class Harness:
    def __init__(self, config: HarnessConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.work_dir = config.work_dir
        self.data_dir = config.work_dir / "data"
        if config.security not in SECURITY_MODES:
            raise ValueError(f"security {config.security!r} is not one of {SECURITY_MODES}")
        self.security: Security | None = None
        if config.security != "off":
            self.security = Security.write(
                config.work_dir / "security", TOPIC, acl=config.security == "acl"
            )
        self.server = ServerProcess(
            self.data_dir,
            config.work_dir / "server.log",
            free_port(),
            config.server_config,
            self.security.server_arguments if self.security else (),
        )
        self.failpoints = failpoint_names()
        self.reached: set[str] = set()
        self.kills: Counter[str] = Counter()
        self.server_failures: list[str] = []
        self.graceful_stops = 0
        self.started = time.monotonic()
        self._last_progress = self.started

    def token(self, principal: str) -> str | None:
        return self.security.tokens[principal] if self.security else None

    def server_started_between(self, start_s: float, end_s: float) -> bool:
        return any(start_s <= started_s <= end_s for started_s in self.server.start_times_s)

    # --- server lives -------------------------------------------------------------

    def _start_clean(self) -> None:
        """Start an unarmed server and wait until it serves (several tries)."""
        for _ in range(5):
            self.server.spawn()
            if self.server.wait_serving():
                return
            self._server_failure("an unarmed server did not start")
            time.sleep(0.5)
        raise ServerGone(
            f"the server does not start any more (5 tries); see {self.server.log_path}"
        )

    def _server_failure(self, what: str) -> None:
        status = self.server.process.poll() if self.server.process else None
        tail = self.server.log_since_start()[-1500:]
        self.server_failures.append(
            f"start #{self.server.starts}: {what} (exit status {status}); log tail:\n{tail}"
        )

    def random_life(self) -> None:
        config = self.config
        self.server.spawn()
        if self.rng.random() < config.startup_kill_probability:
            status = self.server.wait_exit(self.rng.uniform(0.05, 0.8))
            if status is None:
                self.server.kill()
                self.kills["random (start-up)"] += 1
            else:
                self._server_failure("exited during start-up without a failpoint")
            return
        if not self.server.wait_serving():
            self._server_failure("did not start")
            return
        status = self.server.wait_exit(self.rng.uniform(*config.life_s))
        if status is not None:
            self._server_failure("exited on its own without a failpoint")
        elif self.rng.random() < config.graceful_probability:
            # A clean stop now and then: the next start reads what a clean close wrote
            # (the producers' sequence snapshots), and a later kill tests it.
            status = self.server.stop()
            if status == 0:
                self.graceful_stops += 1
            else:
                self._server_failure(f"graceful stop (SIGTERM) ended with {status}")
        else:
            self.server.kill()
            self.kills["random"] += 1

    def failpoint_life(self, name: str) -> None:
        hit = self.rng.randint(1, self.config.failpoint_hits_max)
        self.server.spawn(f"{name}=crash@{hit}")
        serving = self.server.wait_serving()
        status = self.server.process.poll() if self.server.process else None
        if not serving and status != -signal.SIGKILL:
            self._server_failure(f"did not start (armed {name}=crash@{hit})")
            self.server.kill()
            return
        if serving:
            status = self.server.wait_exit(self.config.failpoint_wait_s)
        if status is None:
            self.server.kill()
            self.kills["random (failpoint not reached)"] += 1
        elif status == -signal.SIGKILL:
            self.kills[f"failpoint {name}"] += 1
            self.reached.add(name)
        else:
            self._server_failure(f"exited with {status} (armed {name}=crash@{hit})")

    def _killing_done(self) -> bool:
        elapsed = time.monotonic() - self.started
        if elapsed >= self.config.max_seconds:
            return True
        covered = self.reached >= set(self.failpoints)
        if self.config.minutes is not None:
            return elapsed >= self.config.minutes * 60 and covered
        return sum(self.kills.values()) >= self.config.kills and covered

    def kill_loop(self, workers: Sequence[Worker]) -> None:
        cycle: deque[str] = deque()
        failpoint_turn = True
        while not self._killing_done():
            if len(self.server_failures) > 20:
                raise ServerGone("more than 20 server failures; giving up")
            if failpoint_turn:
                if not cycle:
                    order = list(self.failpoints)
                    self.rng.shuffle(order)
                    order.sort(key=lambda name: name in self.reached)  # unreached ones first
                    cycle.extend(order)
                self.failpoint_life(cycle.popleft())
            else:
                self.random_life()
            failpoint_turn = not failpoint_turn
            self._maybe_progress(workers)

    def _maybe_progress(self, workers: Sequence[Worker]) -> None:
        now = time.monotonic()
        if not self.config.progress or now - self._last_progress < 30:
            return
        self._last_progress = now
        transactions = [
            t for w in workers if isinstance(w, TransactionalWorker) for t in w.transactions
        ]
        outcomes = Counter(t.outcome for t in transactions)
        print(
            f"[{now - self.started:6.0f} s] kills {sum(self.kills.values())}, failpoints reached "
            f"{len(self.reached)}/{len(self.failpoints)}, transactions {len(transactions)} "
            f"(committed {outcomes[COMMITTED]}, aborted {outcomes[ABORTED]}, unknown "
            f"{outcomes[UNKNOWN]}), server failures {len(self.server_failures)}",
            flush=True,
        )

    # --- the whole run -------------------------------------------------------------

    def run(self) -> RunResult:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if self.data_dir.exists() and any(self.data_dir.iterdir()):
            raise SystemExit(f"{self.data_dir} is not empty: give the harness a fresh --work-dir")
        address = self.server.address
        client_log = logging.FileHandler(self.work_dir / "client.log", encoding="utf-8")
        client_log.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)-7s %(threadName)s %(message)s")
        )
        client_logger = logging.getLogger("twinlog.client")
        client_logger.addHandler(client_log)
        level = client_logger.level
        client_logger.setLevel(logging.DEBUG)  # every retry, with its error
        try:
            return self._run(address)
        finally:
            client_logger.removeHandler(client_log)
            client_logger.setLevel(level)
            client_log.close()

    def _run(self, address: str) -> RunResult:
        self._start_clean()
        operator = self.token(OPERATOR)
        victim = self.token(VICTIM)
        settings = self.config.workload
        with Admin(address, retry=RetryPolicy(timeout_ms=30_000), token=operator) as admin:
            with contextlib.suppress(TopicExistsError):
                admin.create_topic(TOPIC, partitions=settings.partitions)
        workers: list[Worker] = [
            TransactionalWorker(index, address, settings, self.rng.randrange(1 << 30), victim)
            for index in range(self.config.producers)
        ]
        if self.config.plain_producer:
            workers.append(PlainWorker(address, settings, self.rng.randrange(1 << 30), victim))
        attacker = self.token(ATTACKER)
        if attacker is not None:
            workers.append(AttackerWorker(address, settings, self.rng.randrange(1 << 30), attacker))
        for worker in workers:
            worker.start()
        gone: ServerGone | None = None
        try:
            time.sleep(1.0)  # some work before the first kill
            self.server.kill()
            self.kills["random"] += 1
            self.kill_loop(workers)
        except KeyboardInterrupt:
            print("interrupted: finishing the run and checking", flush=True)
        except ServerGone as error:
            gone = error
        if gone is None and not self.server.alive():
            try:
                self._start_clean()  # let every producer finish against a healthy server
            except ServerGone as error:
                gone = error
        worker_errors = self._stop_workers(workers)
        logs: dict[int, list[tuple[int, bytes | None]]] = {}
        starts: dict[int, int] = {}
        group_offset: int | None = None
        if gone is None:
            try:
                self._wait_no_transactions(address)
                # One more kill with nothing in flight, then read everything back.
                self.server.kill()
                self.kills["final"] += 1
                self._start_clean()
                self._wait_no_transactions(address)
                logs, starts = read_logs(address, settings.partitions, operator)
                group_offset = read_group_offset(address, operator)
                status = self.server.stop()
                if status != 0:
                    self._server_failure(f"graceful stop (SIGTERM) ended with {status}")
            except ServerGone as error:
                gone = error
        self.server.kill()
        transactions = [
            txn for w in workers if isinstance(w, TransactionalWorker) for txn in w.transactions
        ]
        plain = [write for w in workers if isinstance(w, PlainWorker) for write in w.writes]
        attacks = next((w.attacker.tally for w in workers if isinstance(w, AttackerWorker)), None)
        breaches = attacks.accepted if attacks else []
        if gone is None:
            report = check(transactions, plain, logs, starts, group_offset, breaches)
        else:
            report = CheckReport()  # nothing can be read back: the failure is the finding
            report.add("server failure", f"the run stopped early: {gone}")
            for breach in breaches:
                report.add("isolation breach", breach)
        write_history(self.work_dir / "history.txt", transactions, plain)
        for txn in transactions:
            if txn.reason == ZOMBIE_ACCEPTED:
                report.add(
                    "zombie commit",
                    f"{txn.name}: commit returned OK after a newer generation was initialised",
                )
            if txn.reason == LATE_COMMIT and not self.server_started_between(
                txn.began_s, txn.ended_s
            ):
                # The timeout check runs every transaction_check_interval_ms; only a restart
                # in between (the check's first run comes that long after start) excuses it.
                report.add(
                    "late commit",
                    f"{txn.name}: committed though its producer slept past the transaction "
                    "timeout, with no server restart meanwhile",
                )
        for failure in self.server_failures:
            report.add("server failure", failure)
        return RunResult(
            seed=self.config.seed,
            seconds=time.monotonic() - self.started,
            kills=self.kills,
            graceful_stops=self.graceful_stops,
            failpoints=self.failpoints,
            failpoints_reached=self.reached,
            transactions=transactions,
            producer_resets=sum(w.resets for w in workers if isinstance(w, TransactionalWorker)),
            plain=plain,
            report=report,
            worker_errors=worker_errors,
            work_dir=self.work_dir,
            server_log=self.server.log_path,
            attacks=attacks,
        )

    @staticmethod
    def _stop_workers(workers: Sequence[Worker]) -> list[str]:
        for worker in workers:
            worker.stopping.set()
        errors = []
        for worker in workers:
            worker.join(timeout=120)
            if worker.is_alive():
                errors.append(f"{worker.name} did not finish within 120 s")
            elif worker.error:
                errors.append(f"{worker.name} failed:\n{worker.error}")
        return errors

    def _wait_no_transactions(self, address: str) -> None:
        """Until the broker has no transaction in flight (open ones time out, prepared ones
        complete)."""
        deadline = time.monotonic() + self.config.workload.transaction_timeout_ms / 1000 + 60
        retry = RetryPolicy(timeout_ms=30_000)
        with Admin(address, retry=retry, token=self.token(OPERATOR)) as admin:
            while True:
                in_flight = admin.list_transactions()
                if not in_flight:
                    return
                if time.monotonic() > deadline:
                    states = Counter(t.state.value for t in in_flight)
                    self._server_failure(
                        f"{len(in_flight)} transactions still in flight at the end: {dict(states)}"
                    )
                    return
                time.sleep(0.1)


def write_history(
    path: Path, transactions: Sequence[Transaction], plain: Sequence[PlainWrite]
) -> None:
    """What the clients were told, one line each (for a post-mortem beside the server log)."""
    with path.open("w", encoding="utf-8") as out:
        for txn in transactions:
            shape = " ".join(f"p{p}x{len(v)}" for p, v in sorted(txn.values.items()))
            out.write(f"txn {txn.name} {txn.outcome} [{txn.reason}] {shape}\n")
        for write in plain:
            state = "acknowledged" if write.acknowledged else "unknown"
            out.write(f"plain {_short(write.value)} p{write.partition} {state}\n")


def read_group_offset(address: str, token: str | None = None) -> int:
    """Group ``victims``' committed offset of partition 0 (NO_OFFSET: none)."""
    policy = RetryPolicy(timeout_ms=30_000)
    partition = TopicPartition(TOPIC, 0)
    with RemoteBroker(address, ConnectionOptions(token=token)) as broker:
        found = call_with_retry(
            policy, lambda: broker.fetch_offsets(VICTIM_GROUP, [partition]), "fetch offsets"
        )
    return found.get(partition, NO_OFFSET)


def read_logs(
    address: str, partitions: int, token: str | None = None
) -> tuple[dict[int, list[tuple[int, bytes | None]]], dict[int, int]]:
    """Every record of every partition, raw from the data logs: (offset, value) in log order."""
    logs: dict[int, list[tuple[int, bytes | None]]] = {}
    starts: dict[int, int] = {}
    policy = RetryPolicy(timeout_ms=30_000)
    with RemoteBroker(address, ConnectionOptions(token=token)) as broker:
        for partition in range(partitions):
            start = call_with_retry(
                policy, lambda p=partition: broker.list_offset(TOPIC, p, "earliest"), "list"
            )
            end = call_with_retry(
                policy, lambda p=partition: broker.list_offset(TOPIC, p, "latest"), "list"
            )
            records: list[tuple[int, bytes | None]] = []
            offset = start
            while offset < end:
                fetched = call_with_retry(
                    policy,
                    lambda p=partition, o=offset: broker.fetch(TOPIC, p, o, max_bytes=8 << 20),
                    "fetch",
                )
                batches = list(iter_batches(fetched.records))
                if not batches:
                    raise RuntimeError(f"partition {partition}: empty fetch at {offset} < {end}")
                for batch in batches:
                    records.extend((record.offset, record.value) for record in batch.records())
                    offset = batch.header.next_offset
            logs[partition] = records
            starts[partition] = start
    return logs, starts


# --- the summary --------------------------------------------------------------------------


def format_summary(result: RunResult) -> str:
    transactions = result.transactions
    outcomes = Counter(txn.outcome for txn in transactions)
    reasons = Counter(txn.reason for txn in transactions if txn.outcome == ABORTED)
    unknown_reasons = Counter(
        txn.reason.split(":")[0] for txn in transactions if txn.outcome == UNKNOWN
    )
    report = result.report
    acknowledged = sum(1 for write in result.plain if write.acknowledged)
    rows: list[tuple[str, str]] = [
        ("seed", str(result.seed)),
        ("duration", f"{result.seconds:.1f} s"),
        ("transactions attempted", str(len(transactions))),
        ("  committed (acknowledged)", str(outcomes[COMMITTED])),
        (
            "  aborted",
            f"{outcomes[ABORTED]}"
            + (
                " ("
                + ", ".join(f"{reason} {count}" for reason, count in reasons.most_common())
                + ")"
                if reasons
                else ""
            ),
        ),
        (
            "  unknown outcome",
            f"{outcomes[UNKNOWN]} (resolved by reading: {report.unknown_present} present whole, "
            f"{report.unknown_absent} absent)",
        ),
        (
            "    unknown because",
            ", ".join(f"{reason} {count}" for reason, count in unknown_reasons.most_common())
            or "-",
        ),
        ("  never committed (open)", str(outcomes[OPEN])),
        ("producers re-created", str(result.producer_resets)),
        (
            "plain records sent",
            f"{len(result.plain)} ({acknowledged} acknowledged, "
            f"{len(result.plain) - acknowledged} unknown)",
        ),
        ("records checked", str(report.records_checked)),
        ("kills", str(result.kill_count)),
    ]
    for kind, count in sorted(result.kills.items()):
        rows.append((f"  {kind}", str(count)))
    rows.append(("graceful stops (SIGTERM)", str(result.graceful_stops)))
    unreached = sorted(set(result.failpoints) - result.failpoints_reached)
    rows.append(
        (
            "failpoints reached",
            f"{len(result.failpoints_reached)}/{len(result.failpoints)}"
            + (f" (never: {', '.join(unreached)})" if unreached else ""),
        )
    )
    if result.attacks is not None:
        tally = result.attacks
        rows.append(("attacks (another principal)", f"{len(tally.accepted)} accepted"))
        rows += [(f"  {attack}", tally.summary(attack)) for attack in ATTACKS]
    rows.append(("anomalies", str(report.total)))
    for kind in ANOMALY_CLASSES:
        rows.append((f"  {kind}", str(len(report.anomalies[kind]))))
    rows.append(("worker errors", str(len(result.worker_errors))))
    width = max(len(label) for label, _ in rows)
    lines = ["fault harness summary", "-" * (width + 24)]
    lines += [f"{label:<{width}}  {value}" for label, value in rows]
    details = [
        f"{kind}: {message}" for kind in ANOMALY_CLASSES for message in report.anomalies[kind][:10]
    ]
    if details or result.worker_errors:
        lines.append("")
        lines.append("first anomalies:")
        lines += [f"  {line}" for line in details]
        lines += [f"  {error}" for error in result.worker_errors[:5]]
        lines.append(f"work dir (data + server log): {result.work_dir}")
    return "\n".join(lines)


# --- command line -------------------------------------------------------------------------


def run(config: HarnessConfig) -> RunResult:
    return Harness(config).run()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Kill a real twinlog server (SIGKILL, at random times and at every named "
        "failpoint) under a transactional workload; check every acknowledged commit is whole "
        "and nothing aborted is visible.",
        epilog="examples:\n"
        "  .venv/bin/python tests/system/fault_harness.py                 # CI mode: >= 30 kills\n"
        "  .venv/bin/python tests/system/fault_harness.py --minutes 60 --seed 7\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--minutes", type=float, help="long mode: kill for this many minutes")
    parser.add_argument(
        "--kills", type=int, default=30, help="CI mode: at least this many kills (default 30)"
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument(
        "--work-dir",
        "--data-dir",
        dest="work_dir",
        help="directory for the data and server log (must be fresh; default: a temporary one, "
        "removed after a clean run)",
    )
    parser.add_argument("--producers", type=int, default=3, help="transactional producers")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the topic")
    parser.add_argument("--keep", action="store_true", help="keep the work dir after a clean run")
    parser.add_argument(
        "--security",
        choices=SECURITY_MODES,
        default="acl",
        help="acl (default, as CI): tokens, ACLs and an attacker principal; tokens: the same "
        "without ACLs, so the attacks succeed (isolation breaches); off: no tokens, no attacker",
    )
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    temporary = args.work_dir is None
    work_dir = Path(args.work_dir or tempfile.mkdtemp(prefix="twinlog-fault-"))
    minutes = args.minutes
    config = HarnessConfig(
        work_dir=work_dir,
        seed=seed,
        kills=args.kills,
        minutes=minutes,
        max_seconds=(minutes * 60 + 600) if minutes else 600.0,
        producers=args.producers,
        workload=WorkloadSettings(partitions=args.partitions),
        progress=True,
        security=args.security,
    )
    print(
        f"fault harness: seed {seed}, work dir {work_dir}, "
        + (f"{minutes} minutes" if minutes else f">= {args.kills} kills"),
        flush=True,
    )
    result = run(config)
    print(result.summary(), flush=True)
    if result.ok and temporary and not args.keep:
        shutil.rmtree(work_dir, ignore_errors=True)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
