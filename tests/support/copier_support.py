"""Helpers shared by the journal and copier tests (imported as ``copier_support``; no tests).

Run as a script it is the crash worker of ``test_copier_crash``:

    python tests/copier_support.py DATA_DIR TRANSACTION_ID [ATTEMPT ...]

opens the partition (journal, data log, copier recovery) and applies the
commit of TRANSACTION_ID, so that a failpoint armed through TWINLOG_FAILPOINTS
can SIGKILL it at any step. Exit status 0 means no failpoint fired.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from twinlog.copier import CommitCall, PartitionWriter
from twinlog.copier.marks_left import MarksLeft
from twinlog.engine.base.errors import NotEnoughReplicasAfterAppendError
from twinlog.engine.base.failpoints import ENVIRONMENT_VARIABLE
from twinlog.engine.log import DataLog, LogConfig
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_format import LENGTH_PREFIX_BYTES, BatchHeader, read_header
from twinlog.journal import JournalConfig, JournalLogs, LocalJournal

TIMESTAMP_MS = 1_700_000_000_000
PRODUCER_ID = 4242
PARTITION = "orders-0"


def transactional_batch(
    transaction_id: int,
    base_sequence: int = 0,
    record_count: int = 2,
    value_bytes: int = 20,
    producer_id: int = PRODUCER_ID,
    producer_generation: int = 1,
) -> bytes:
    """A batch whose values name the transaction and sequence, so a misplaced one is visible."""
    builder = RecordBatchBuilder(
        "none",
        producer_id=producer_id,
        producer_generation=producer_generation,
        base_sequence=base_sequence,
        transactional=True,
    )
    for record in range(record_count):
        value = f"t{transaction_id}:s{base_sequence}:r{record}:".encode().ljust(value_bytes, b"v")
        builder.append(value, timestamp_ms=TIMESTAMP_MS)
    return builder.build()


def plain_batch(tag: int, record_count: int = 1) -> bytes:
    builder = RecordBatchBuilder("none")
    for record in range(record_count):
        builder.append(f"plain{tag}:{record}".encode(), timestamp_ms=TIMESTAMP_MS)
    return builder.build()


def body(batch: bytes | memoryview) -> bytes:
    """A batch without its base offset and partition leader epoch (both stamped by the log):
    what the log keeps of what the producer sent (length, magic, CRC and all it covers)."""
    return bytes(batch[8:12]) + bytes(batch[16:])


def log_bodies(log: DataLog) -> list[bytes]:
    """Every batch of the log as ``body`` gives it, checking the offsets are contiguous."""
    bodies = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 24)
        position = 0
        while position < len(chunk):
            header = read_header(chunk, position)
            assert header.base_offset == offset, f"batch at {header.base_offset}, expected {offset}"
            size = LENGTH_PREFIX_BYTES + header.batch_length
            assert header.partition_leader_epoch == log.leader_epoch  # stamped on append
            bodies.append(body(chunk[position : position + size]))
            position += size
            offset = header.next_offset
    return bodies


def log_headers(log: DataLog) -> list[BatchHeader]:
    return (
        list(log.iter_headers(log.log_start_offset))
        if log.log_end_offset > log.log_start_offset
        else []
    )


@dataclass
class PartitionFixture:
    """One partition's journal, data log and copier in ``data_dir`` (journal/ for LMDB,
    logs/NAME/ for the data log, logs/NAME/journal/ for its journal log)."""

    data_dir: Path
    name: str = PARTITION
    log_config: LogConfig | None = None
    journal_config: JournalConfig | None = None
    marks_left: MarksLeft | None = None  # as the broker's: MARK_APPLIED left for the next

    def __post_init__(self) -> None:
        self.journal: JournalLogs | None = None
        self.open()

    @property
    def log_directory(self) -> Path:
        return self.data_dir / "logs" / self.name

    def open(self, recover: bool = True) -> None:
        self.journal = JournalLogs(
            LocalJournal.open(self.data_dir / "journal", self.journal_config)
        )
        self.log = DataLog.open(self.log_directory, self.log_config)
        self.journal.open_partition(self.name, self.log_directory)
        self.writer = PartitionWriter(self.name, self.log, self.journal, marks_left=self.marks_left)
        if recover:
            self.writer.recover()

    def close(self) -> None:
        self.log.close()
        assert self.journal is not None
        self.journal.close()

    def restart(self) -> None:
        self.close()
        self.open()

    @property
    def j(self) -> JournalLogs:
        assert self.journal is not None
        return self.journal

    def journal_transaction(self, transaction_id: int, batches: list[bytes]) -> None:
        for batch in batches:
            self.j.append(self.name, transaction_id, batch)


def replicated_leader_journal(
    data_dir: Path, partition: str, committing: list[bool]
) -> JournalLogs:
    """A journal whose ``partition`` has a replicated leader's journal log (epoch 1): a
    write's wait for the replicas commits it while ``committing[0]``, else raises
    NotEnoughReplicasAfterAppendError. The caller closes it."""
    journal = JournalLogs(LocalJournal.open(data_dir / "journal"))

    def wait_committed(end_offset: int) -> None:
        if not committing[0]:
            raise NotEnoughReplicasAfterAppendError("the replicas did not answer (test)")
        journal.commit_to(partition, end_offset)

    journal.open_partition(partition, data_dir / "logs" / partition, wait_committed=wait_committed)
    journal.become_leader(partition, 1)
    return journal


def run_crash_worker(
    data_dir: Path, transaction_ids: str, failpoint: str | None, attempts: tuple[str, ...] = ()
) -> int:
    """Run this file as the crash worker (``transaction_ids``: one, or several joined by
    commas for a copy group) with ``failpoint`` armed; its exit status, 0 or -SIGKILL."""
    environment = dict(os.environ)
    environment.pop(ENVIRONMENT_VARIABLE, None)
    if failpoint:
        environment[ENVIRONMENT_VARIABLE] = failpoint
    completed = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), str(data_dir), transaction_ids, *attempts],
        cwd=Path(__file__).resolve().parents[2],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode in (0, -signal.SIGKILL), completed.stderr
    return completed.returncode


def _worker(data_dir: str, callers: list[list[int]], attempts: list[str]) -> int:
    partition = PartitionFixture(Path(data_dir))  # opens and recovers
    chosen = [a.encode() for a in attempts] if attempts else None
    if len(callers) == 1 and len(callers[0]) == 1:
        partition.writer.apply_commit(callers[0][0], attempts=chosen)
    elif len(callers) == 1:
        _apply_group(partition, callers[0], chosen)
    else:
        _apply_side_by_side(partition, callers, chosen)
    partition.close()
    return 0


def _apply_group(
    partition: PartitionFixture, transaction_ids: list[int], chosen: list[bytes] | None
) -> None:
    outcomes = partition.writer.apply_commits([CommitCall(t, chosen) for t in transaction_ids])
    failed = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    if failed:
        raise failed[0]


def _apply_side_by_side(
    partition: PartitionFixture, callers: list[list[int]], chosen: list[bytes] | None
) -> None:
    """Each caller's group from a thread of its own, the first one's copy held (at its
    replicated wait) until every other caller queued behind it: the copier's group
    commit then copies the others as the next group, whose MARK_APPLYING write carries
    the first group's MARK_APPLIED records."""
    queued = threading.Event()
    first_wait = threading.Event()

    def wait_replicated(end_offset: int) -> None:
        first_wait.set()
        queued.wait(30)

    partition.writer.wait_replicated = wait_replicated
    errors: list[BaseException] = []

    def apply(transaction_ids: list[int]) -> None:
        try:
            _apply_group(partition, transaction_ids, chosen)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=apply, args=(callers[0],))]
    threads[0].start()
    first_wait.wait(30)
    for transaction_ids in callers[1:]:
        threads.append(threading.Thread(target=apply, args=(transaction_ids,)))
        threads[-1].start()
    deadline_s = time.monotonic() + 30
    while len(partition.writer._queued) < len(callers) - 1 and time.monotonic() < deadline_s:
        time.sleep(0.001)
    queued.set()
    for thread in threads:
        thread.join(30)
    if errors:
        raise errors[0]


if __name__ == "__main__":
    # Callers separated by "/", each caller's transaction ids by ",".
    groups = [[int(part) for part in caller.split(",")] for caller in sys.argv[2].split("/")]
    sys.exit(_worker(sys.argv[1], groups, sys.argv[3:]))
