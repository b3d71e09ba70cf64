"""Zombies and time: late producers and late APPLY deliveries change nothing.

Process level: a producer process is paused (SIGSTOP) past its transaction
timeout; the broker aborts its transaction; a successor with the same
transactional id fences it and commits. Woken (SIGCONT), the zombie keeps
sending and tries to commit, through the client and then straight on the wire:
every late request is refused (ProducerFencedError or InvalidTxnStateError),
none of its records ever appears, and the successor's records are all there,
exactly once (its second transaction was open while the zombie ran loose).

Engine level (KAFKA-17754's shape): an APPLY_ABORT for an earlier transaction
delivered after a later transaction of the same producer has started, or has
committed, on the same partition, and duplicate or late APPLY_COMMITs, through
the coordinator's own applier: the data logs do not change, the later
transaction's journal entries are untouched, and its records all appear once.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_process import ROOT, ServerProcess, environment

from twinlog.engine.base.errors import InvalidTxnStateError, TransactionCompletedError
from twinlog.engine.base.types import ProducerIdentity, TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import build_batch
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.engine.transactions.partition_calls import ApplyAbort, ApplyCommit, CallEpochs
from twinlog.rpc.client import Admin
from twinlog.rpc.client.remote import RemoteBroker

pytestmark = [pytest.mark.slow]

ZOMBIE_TIMEOUT_MS = 1_000
PARTITIONS = 3
RECORDS_PER_PARTITION = 3  # tests/workers/zombie_producer.py
REFUSALS = {"ProducerFencedError", "InvalidTxnStateError", "TransactionCompletedError"}
LINE_TIMEOUT_S = 30.0


# --- processes -----------------------------------------------------------------------------


class Worker:
    """A ``tests.workers.zombie_producer`` process whose stdout is read line by line."""

    def __init__(self, *arguments: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.workers.zombie_producer", *arguments],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
            env=environment(),
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        with self.process.stdout:  # the reader closes the pipe it reads, at its end
            for line in self.process.stdout:
                self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self, timeout_s: float = LINE_TIMEOUT_S) -> str:
        try:
            line = self.lines.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"worker silent for {timeout_s} s; so far: {self.seen}") from None
        if line is None:
            raise AssertionError(f"worker ended early; its output: {self.seen}")
        self.seen.append(line)
        return line

    def wait_for(self, prefix: str) -> str:
        """The next line starting with ``prefix`` (protocol lines only; others are kept)."""
        while True:
            line = self.next_line()
            if line.startswith(prefix):
                return line

    def lines_until(self, last: str) -> list[str]:
        found = []
        while (line := self.next_line()) != last:
            found.append(line)
        return found

    def finish(self, timeout_s: float = 30) -> None:
        assert self.process.wait(timeout=timeout_s) == 0, self.seen
        self._close()

    def _close(self) -> None:
        """Its stdin closed and its reader (which closes stdout) ended: the process is gone."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass  # a line the dead process never read
        self.reader.join(timeout=LINE_TIMEOUT_S)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a stopped process cannot die otherwise
            self.process.kill()
            self.process.wait()
        self._close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("zombies")
    with ServerProcess(
        directory / "data", "--config", "transaction_check_interval_ms=100"
    ) as process:
        yield process
        assert process.stop() == 0, process.log()[-5000:]


def read_values(address: str, topic: str) -> dict[int, list[bytes]]:
    """Every record value of every partition, in log order (the data logs, as a reader sees them)."""
    found: dict[int, list[bytes]] = {}
    with RemoteBroker(address) as broker:
        for partition in range(PARTITIONS):
            values: list[bytes] = []
            offset = 0
            end = broker.list_offset(topic, partition, "latest")
            while offset < end:
                fetched = broker.fetch(topic, partition, offset)
                for batch in iter_batches(fetched.records):
                    for record in batch.records():
                        if record.offset >= offset:
                            values.append(record.value or b"")
                    offset = batch.header.next_offset
            found[partition] = values
    return found


def wait_until(condition: object, what: str, timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def expected_successor_values(partition: int) -> list[bytes]:
    return [
        f"successor-{transaction}-{partition}-{number}".encode()
        for transaction in (1, 2)
        for number in range(RECORDS_PER_PARTITION)
    ]


@pytest.mark.parametrize("successor", [True, False], ids=["fenced-by-successor", "timed-out"])
def test_paused_producer_wakes_up_refused_and_invisible(
    server: ServerProcess, successor: bool
) -> None:
    topic = f"zombies-{'fenced' if successor else 'timeout'}"
    transactional_id = f"zombie-{topic}"
    with Admin(server.address) as admin:
        admin.create_topic(topic, partitions=PARTITIONS)
    zombie = Worker("zombie", server.address, topic, transactional_id, str(ZOMBIE_TIMEOUT_MS))
    follower: Worker | None = None
    try:
        zombie_txn = int(zombie.wait_for("READY ").split()[1])
        os.kill(zombie.process.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        with RemoteBroker(server.address) as broker:
            # The broker aborts the paused producer's transaction once it times out.
            wait_until(
                lambda: all(t.transaction_id != zombie_txn for t in broker.list_transactions()),
                "the zombie's transaction to time out",
            )
            assert time.monotonic() - stopped_at >= ZOMBIE_TIMEOUT_MS / 1000 * 0.5
            wait_until(
                lambda: all(
                    p.journal_entries_pending == 0 for p in broker.describe_topic(topic).partitions
                ),
                "the aborted entries to be dropped from the journal",
            )
        if successor:
            follower = Worker("successor", server.address, topic, transactional_id)
            assert follower.wait_for("COMMITTED ") == "COMMITTED 1"
            assert follower.wait_for("OPEN ") == "OPEN 2"
        assert zombie.lines.empty(), f"the zombie ran on before it was stopped: {zombie.seen}"
        os.kill(zombie.process.pid, signal.SIGCONT)
        assert zombie.wait_for("AWAKE") == "AWAKE"
        outcomes = zombie.lines_until("DONE")
        zombie.finish()
        attempts = [line for line in outcomes if line.startswith(("REFUSED", "ACCEPTED"))]
        assert len(attempts) == PARTITIONS * RECORDS_PER_PARTITION + 1 + PARTITIONS + 4, outcomes
        accepted = [line for line in attempts if line.startswith("ACCEPTED")]
        # Without a successor, aborting the transaction the broker already aborted is a
        # retry of the same end: answered OK, nothing changes; and the producer, not fenced,
        # may begin a new transaction (the worker aborts it at once). With a successor, its
        # old generation may begin nothing.
        expected = [] if successor else ["ACCEPTED raw-abort", "ACCEPTED raw-begin"]
        assert accepted == expected, outcomes
        refusals = {line.split()[2] for line in attempts if line.startswith("REFUSED")}
        assert refusals <= REFUSALS, outcomes
        if successor:
            assert "ProducerFencedError" in refusals, outcomes
            assert follower is not None
            follower.process.stdin.write("commit\n")  # type: ignore[union-attr]
            follower.process.stdin.flush()  # type: ignore[union-attr]
            assert follower.wait_for("COMMITTED ") == "COMMITTED 2"
            assert follower.wait_for("DONE") == "DONE"
            follower.finish()
    finally:
        zombie.kill()
        if follower is not None:
            follower.kill()
    values = read_values(server.address, topic)
    for partition, found in values.items():
        assert not [v for v in found if v.startswith(b"zombie")], (partition, found)
        assert found == (expected_successor_values(partition) if successor else []), found
    with RemoteBroker(server.address) as broker:
        assert all(t.transactional_id != transactional_id for t in broker.list_transactions())
        # A copy's MARK_APPLIED rides in the partition's next journal write (at most
        # MARKS_LEFT_DELAY_MS later), so the successor's entries are dropped soon, not at once.
        wait_until(
            lambda: all(
                p.journal_entries_pending == 0 for p in broker.describe_topic(topic).partitions
            ),
            "the committed entries to be dropped from the journal",
        )


# --- engine level: stale APPLY deliveries ---------------------------------------------------


class Txn:
    """A transactional producer over the embedded broker, numbering its own sequences."""

    def __init__(self, broker: Broker, transactional_id: str) -> None:
        self.broker = broker
        self.identity: ProducerIdentity = broker.init_producer(transactional_id)
        self.owner = (self.identity.producer_id, self.identity.producer_generation)
        self.transaction_id = -1
        self.sequences: dict[int, int] = {}

    def begin(self) -> int:
        self.transaction_id = self.broker.begin_transaction(*self.owner)
        self.sequences = {}
        return self.transaction_id

    def send(self, partition: int, values: list[bytes]) -> None:
        sequence = self.sequences.get(partition, 0)
        self.broker.produce(
            TOPIC,
            partition,
            self.batch(self.transaction_id, sequence, values),
            transaction_id=self.transaction_id,
        )
        self.sequences[partition] = sequence + len(values)

    def batch(self, transaction_id: int, sequence: int, values: list[bytes]) -> bytes:
        return build_batch(
            values,
            compression="none",
            producer_id=self.identity.producer_id,
            producer_generation=self.identity.producer_generation,
            base_sequence=sequence,
            transactional=True,
        )

    def commit(self) -> None:
        self.broker.commit_transaction(self.transaction_id, *self.owner, wait_for_applied=True)

    def abort(self) -> None:
        self.broker.abort_transaction(self.transaction_id, *self.owner, wait_for_applied=True)


TOPIC = "stale"
P0, P1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
EPOCHS = CallEpochs(0, 0, 0)  # a coordinator's epochs on one node


def data_logs(broker: Broker) -> dict[int, bytes]:
    """The raw bytes of both data logs (offsets, batches, everything a reader gets)."""
    found = {}
    for partition in (0, 1):
        result = broker.fetch(TOPIC, partition, 0, max_bytes=1 << 24)
        assert not result.records or result.log_end_offset > 0
        found[partition] = bytes(result.records)
    return found


def values_of(broker: Broker, partition: int) -> list[bytes]:
    records = broker.fetch(TOPIC, partition, 0, max_bytes=1 << 24).records
    return [r.value or b"" for b in iter_batches(records) for r in b.records()]


def journal_view(broker: Broker, transaction_id: int) -> dict[str, object]:
    journal = broker.journal
    view: dict[str, object] = {}
    for tp in (P0, P1):
        record = journal.transaction(str(tp), transaction_id)
        view[str(tp)] = (
            None if record is None else (record.state, record.entry_count, record.size_bytes),
            list(journal.sequences(str(tp), transaction_id)),
        )
    return view


def deliver(action: object) -> str:
    """Run one stale delivery; what it answered (refusing is fine, changing things is not)."""
    try:
        action()  # type: ignore[operator]
    except InvalidTxnStateError as error:
        return f"refused: {type(error).__name__}"
    return "ok"


def test_stale_apply_deliveries_change_nothing(tmp_path: Path) -> None:
    broker = Broker.open(tmp_path / "data", transaction_check_interval_ms=60_000)
    try:
        broker.create_topic(TOPIC, partitions=2)
        applier = broker.local_partition_leaders  # the coordinator's seam to partitions
        producer = Txn(broker, "stale-producer")
        committed = producer.begin()  # T1: committed on both partitions
        producer.send(0, [b"t1-a", b"t1-b"])
        producer.send(1, [b"t1-c"])
        producer.commit()
        aborted = producer.begin()  # T2: aborted, wrote to partition 0 only
        producer.send(0, [b"t2-never"])
        producer.abort()
        later = producer.begin()  # T3: same producer, open on both partitions
        producer.send(0, [b"t3-a", b"t3-b"])
        producer.send(1, [b"t3-c"])
        logs_before = data_logs(broker)
        open_before = journal_view(broker, later)
        assert values_of(broker, 0) == [b"t1-a", b"t1-b"]

        # Late deliveries while T3 is open: for T1 (applied), T2 (aborted), on every partition.
        answers = {
            "abort T1 on p0": deliver(
                lambda: applier.apply_abort(ApplyAbort(committed, P0, EPOCHS))
            ),
            "abort T1 on p1": deliver(
                lambda: applier.apply_abort(ApplyAbort(committed, P1, EPOCHS))
            ),
            "abort T2 on p0": deliver(lambda: applier.apply_abort(ApplyAbort(aborted, P0, EPOCHS))),
            "abort T2 on p1": deliver(lambda: applier.apply_abort(ApplyAbort(aborted, P1, EPOCHS))),
            "commit T1 on p0": deliver(
                lambda: applier.apply_commit(ApplyCommit(committed, P0, None, 0, EPOCHS))
            ),
            "commit T1 on p1": deliver(
                lambda: applier.apply_commit(ApplyCommit(committed, P1, None, 0, EPOCHS))
            ),
            "commit T2 on p0": deliver(
                lambda: applier.apply_commit(ApplyCommit(aborted, P0, None, 0, EPOCHS))
            ),
        }
        # An applied transaction cannot be aborted, an aborted one cannot be applied;
        # repeating the same end answers as before (idempotent).
        assert answers["abort T1 on p0"].startswith("refused")
        assert answers["commit T2 on p0"].startswith("refused")
        assert answers["commit T1 on p0"] == answers["commit T1 on p1"] == "ok"
        assert answers["abort T2 on p0"] == "ok"
        assert data_logs(broker) == logs_before, answers
        assert journal_view(broker, later) == open_before, answers
        # Late sends of the earlier transactions are refused too, and journal nothing.
        for stale in (committed, aborted):
            with pytest.raises(InvalidTxnStateError):
                broker.produce(TOPIC, 0, producer.batch(stale, 10, [b"late"]), transaction_id=stale)
        assert journal_view(broker, later) == open_before

        producer.commit()  # T3 commits: all of it, once, after T1's records
        assert values_of(broker, 0) == [b"t1-a", b"t1-b", b"t3-a", b"t3-b"]
        assert values_of(broker, 1) == [b"t1-c", b"t3-c"]
        logs_after_t3 = data_logs(broker)

        # Once T3 is applied: duplicate APPLY_COMMITs of T3 and T1, stale aborts of all three.
        for tp in (P0, P1):
            for transaction_id in (later, committed):
                assert (
                    deliver(
                        lambda tp=tp, t=transaction_id: applier.apply_commit(
                            ApplyCommit(t, tp, None, 2, EPOCHS)
                        )
                    )
                    == "ok"
                )
            assert deliver(
                lambda tp=tp: applier.apply_abort(ApplyAbort(later, tp, EPOCHS))
            ).startswith("refused")
            deliver(lambda tp=tp: applier.apply_abort(ApplyAbort(committed, tp, EPOCHS)))
            deliver(lambda tp=tp: applier.apply_abort(ApplyAbort(aborted, tp, EPOCHS)))
        assert data_logs(broker) == logs_after_t3
        with pytest.raises(TransactionCompletedError):  # the journal refuses T3's leftovers
            broker.journal.append(str(P0), later, producer.batch(later, 3, [b"late"]))
    finally:
        broker.close()

    # After a restart the journal has forgotten T1..T3 (purged below the low watermark):
    # late deliveries find no record at all, and still change no data log.
    broker = Broker.open(tmp_path / "data", transaction_check_interval_ms=60_000)
    try:
        applier = broker.local_partition_leaders
        assert data_logs(broker) == logs_after_t3
        for tp in (P0, P1):
            for transaction_id in (committed, aborted, later):
                deliver(
                    lambda tp=tp, t=transaction_id: applier.apply_abort(ApplyAbort(t, tp, EPOCHS))
                )
                deliver(
                    lambda tp=tp, t=transaction_id: applier.apply_commit(
                        ApplyCommit(t, tp, None, 2, EPOCHS)
                    )
                )
        assert data_logs(broker) == logs_after_t3
        producer = Txn(broker, "stale-producer")  # the next generation, one more transaction
        producer.begin()
        producer.send(0, [b"t4-a"])
        producer.send(1, [b"t4-b"])
        producer.commit()
        assert values_of(broker, 0) == [b"t1-a", b"t1-b", b"t3-a", b"t3-b", b"t4-a"]
        assert values_of(broker, 1) == [b"t1-c", b"t3-c", b"t4-b"]
    finally:
        broker.close()
