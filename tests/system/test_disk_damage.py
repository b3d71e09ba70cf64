"""Damaged files on disk: the broker recovers, or refuses naming the file; never wrong data.

One pristine data directory (module fixture) holds committed plain and
transactional data in several segments, an aborted and a still-open
transaction, group offsets, a topic that retention has trimmed, a transaction
journal checkpoint and every broker file; the broker is closed cleanly, so
every byte of it was acknowledged and fsynced. Each case copies it, damages one
file (one flipped bit at a seeded random position, or a cut at a seeded random
length), reopens the broker and reads every partition back through fetch and
the batch reader, exactly as a consumer does. Exactly one of these must hold:

1. open succeeds and every partition reads back exactly what was written:
   same records, same order, offsets dense from the log start (a clean close
   leaves no torn tail, so nothing may be missing);
2. open, or the read, raises a typed twinlog error (``twinlog.engine.base.errors``) whose
   message names the damaged file (CorruptLogError also carries its path and
   a position inside it).

Derived files (offset and time indexes, producer-state snapshots, checkpoints
of where recovery starts) must always give outcome 1: they are rebuilt or
ignored. Files without a recoverable copy (segments, the transaction journal
and its checkpoint, the LMDB journal, meta, ids) may give either.

LMDB keeps no checksums: a flipped bit in a page it never reads again changes
nothing, one in a page it reads must raise CorruptJournalError. Because
LMDB is C code walking pointers found in the file, those cases run the broker
in a forked child, so a crash there fails the test instead of killing pytest.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import lmdb
import pytest
from broker_support import batch

from twinlog.engine.base.errors import (
    CorruptLogError,
    InvalidTxnStateError,
    TransactionDataMissingError,
    TwinlogError,
    UnknownTransactionError,
)
from twinlog.engine.base.types import ProducerIdentity, TopicPartition, TransactionState
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_format import BatchHeader, read_header
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.journal.txn_checkpoint_pointer import LocalCheckpointPointerFile

CONFIG = {
    "journal_partitions": 1,
    "offsets_partitions": 2,
    "journal_map_bytes_initial": 1 << 20,
    "transaction_check_interval_ms": 3_600_000,  # the open transaction stays open
    "checkpoint_interval_ms": 3_600_000,  # the test writes the checkpoint itself
    "retention_check_interval_ms": 3_600_000,  # and runs retention itself
}
TOPIC_CONFIG = {"segment.bytes": "700", "index.interval.bytes": "200"}
TRIMMED_CONFIG = {"segment.bytes": "600", "retention.bytes": "1500", "retention.ms": "-1"}
FLIPS_PER_FILE = 10
CUTS_PER_FILE = 4
CHILD_TIMEOUT_S = 60
APPLY_WAIT_S = 5.0  # a copy that has not finished by then was refused (it retries)

Record = tuple[int, bytes | None, bytes | None]  # offset, key, value
Contents = dict[TopicPartition, tuple[int, list[Record]]]  # log start offset, records


# --- building the pristine directory ---------------------------------------------------


class _Transactions:
    def __init__(self, broker: Broker, transactional_id: str) -> None:
        self.broker = broker
        self.identity = broker.init_producer(transactional_id)
        self.transaction_id = -1
        self.sequences: dict[TopicPartition, int] = {}

    def begin(self) -> None:
        identity = self.identity
        self.transaction_id = self.broker.begin_transaction(
            identity.producer_id, identity.producer_generation
        )
        self.sequences = {}

    def send(self, topic: str, partition: int, values: list[bytes], codec: str = "none") -> None:
        where = TopicPartition(topic, partition)
        sequence = self.sequences.get(where, 0)
        self.broker.produce(
            topic,
            partition,
            batch(
                values,
                self.identity,
                sequence,
                self.transaction_id,
                codec,
                keyed=True,
            ),
            transaction_id=self.transaction_id,
        )
        self.sequences[where] = sequence + len(values)

    def end(self, commit: bool) -> None:
        identity = self.identity
        finish = self.broker.commit_transaction if commit else self.broker.abort_transaction
        finish(
            self.transaction_id,
            identity.producer_id,
            identity.producer_generation,
            wait_for_applied=True,
        )


OPEN_VALUES = {TopicPartition("t", 0): [b"open-0"] * 2, TopicPartition("t", 1): [b"open-1"]}


def _build(directory: Path) -> tuple[int, ProducerIdentity]:
    """The pristine directory; returns the transaction left open and its producer."""
    with Broker.open(directory, **CONFIG) as broker:
        broker.create_topic("t", partitions=2, config=TOPIC_CONFIG)
        broker.create_topic("trimmed", partitions=1, config=TRIMMED_CONFIG)
        plain = broker.init_producer()
        sequences = [0, 0]
        transactions = _Transactions(broker, "app")
        for round_number in range(6):
            for partition in (0, 1):
                values = [f"plain-{round_number}-{partition}-{n}".encode() * 3 for n in range(3)]
                codec = "zstd" if round_number % 2 else "none"
                broker.produce(
                    "t",
                    partition,
                    batch(values, plain, sequences[partition], codec=codec, keyed=True),
                )
                sequences[partition] += len(values)
            transactions.begin()
            for partition in (0, 1):
                transactions.send(
                    "t", partition, [f"txn-{round_number}-{partition}".encode() * 4] * 2
                )
            if round_number == 2:
                broker.send_offsets_to_transaction(
                    transactions.transaction_id,
                    transactions.identity.producer_id,
                    transactions.identity.producer_generation,
                    "group",
                    {TopicPartition("t", 0): 7},
                )
            transactions.end(commit=round_number != 4)  # round 4 is aborted
        broker.commit_offsets("other-group", {TopicPartition("t", 1): 3})
        for number in range(20):
            broker.produce(
                "trimmed", 0, batch([f"old-{number}".encode() * 10], codec="none", keyed=True)
            )
        broker.partition(TopicPartition("trimmed", 0)).log.apply_retention()
        broker.coordinators[0].checkpoint()
        # Still open at close: journaled in LMDB, never to be read from a data log.
        transactions.begin()
        transactions.send("t", 0, [b"open-0"] * 2)
        transactions.send("t", 1, [b"open-1"])
        return transactions.transaction_id, transactions.identity


def _read_everything(broker: Broker) -> Contents:
    """Every record of every partition, fetched the way a consumer fetches."""
    found: Contents = {}
    for topic in [*broker.list_topics(), "__consumer_offsets"]:
        for described in broker.describe_topic(topic).partitions:
            where = TopicPartition(topic, described.partition)
            start = broker.list_offset(topic, where.partition, "earliest")
            end = broker.list_offset(topic, where.partition, "latest")
            records: list[Record] = []
            offset = start
            while offset < end:
                fetched = broker.fetch(topic, where.partition, offset, max_bytes=700)
                batches = list(iter_batches(fetched.records))
                assert batches, f"fetch at {offset} of {where} returned nothing before {end}"
                for fetched_batch in batches:
                    records.extend(
                        (record.offset, record.key, record.value)
                        for record in fetched_batch.records()
                        if record.offset >= offset
                    )
                offset = batches[-1].header.next_offset
            assert [record[0] for record in records] == list(range(start, end)), where
            found[where] = (start, records)
    return found


@dataclass(frozen=True)
class Pristine:
    directory: Path
    contents: Contents
    open_transaction_id: int
    open_producer: ProducerIdentity


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    directory = tmp_path_factory.mktemp("pristine") / "data"
    open_transaction_id, open_producer = _build(directory)
    # Read a copy: opening consumes the producer-state snapshots, and the pristine
    # directory keeps every file a cleanly closed broker leaves.
    reference = directory.parent / "reference"
    shutil.copytree(directory, reference)
    with Broker.open(reference, **CONFIG) as broker:
        contents = _read_everything(broker)
    values = [record[2] for record in contents[TopicPartition("t", 0)][1]]
    assert values.count(b"plain-0-0-0" * 3) == 1
    assert sum(1 for value in values if value and value.startswith(b"txn-")) == 10  # 5 commits
    assert not any(value and b"txn-4" in value for value in values)  # aborted
    assert not any(value and b"open" in value for value in values)  # still open
    assert contents[TopicPartition("trimmed", 0)][0] > 0  # retention moved the start
    return Pristine(directory, contents, open_transaction_id, open_producer)


# --- the files, and the damage ------------------------------------------------------------


def _files(directory: Path) -> dict[str, Path]:
    """One representative file of each kind, by kind."""
    t0 = directory / "logs" / "t-0"
    segments = sorted(t0.glob("*.log"))
    assert len(segments) >= 3, segments
    txn = directory / "logs" / "__txn_journal-0"  # coordinator 0's journal
    offsets = sorted(
        path
        for path in (directory / "logs").glob("__consumer_offsets-*/*.log")
        if path.stat().st_size
    )
    return {
        "sealed-segment": segments[0],
        "middle-segment": segments[len(segments) // 2],
        "active-segment": segments[-1],
        "sealed-offset-index": segments[0].with_suffix(".index"),
        "sealed-time-index": segments[0].with_suffix(".timeindex"),
        "active-offset-index": segments[-1].with_suffix(".index"),
        "active-time-index": segments[-1].with_suffix(".timeindex"),
        "recovery-point": t0 / "recovery-point",
        "log-start-offset": directory / "logs" / "trimmed-0" / "log-start-offset",
        "producer-state": max(t0.glob("producer-state-*.json")),  # the newest snapshot
        "offsets-segment": offsets[0],
        "txn-journal-segment": next(txn.glob("*.log")),
        "txn-journal-replayed": next(txn.glob("*.log")),
        "txn-journal-recovery-point": txn / "recovery-point",
        "txn-checkpoint": txn / "checkpoint",
        "meta": directory / "meta",
        "ids": directory / "ids",
        "lmdb-data": directory / "journal" / "data.mdb",
        "lmdb-page-header": directory / "journal" / "data.mdb",
        "lmdb-lock": directory / "journal" / "lock.mdb",
    }


DERIVED = {
    "sealed-offset-index",
    "sealed-time-index",
    "active-offset-index",
    "active-time-index",
    "recovery-point",
    "log-start-offset",
    "producer-state",
    "txn-journal-recovery-point",
    "lmdb-lock",
}
KINDS = sorted(
    {
        "sealed-segment",
        "middle-segment",
        "active-segment",
        "offsets-segment",
        "txn-journal-segment",
        "txn-journal-replayed",
        "txn-checkpoint",
        "meta",
        "ids",
        "lmdb-data",
        "lmdb-page-header",
    }
    | DERIVED
)


def _damage_range(kind: str, path: Path) -> tuple[int, int]:
    """[start, end) of the bytes damage is aimed at: the whole file, LMDB's pages in use, or
    the part of the transaction journal that replay reads (after the checkpoint's offset)."""
    size = path.stat().st_size
    if kind.startswith("lmdb-data") or kind == "lmdb-page-header":
        environment = lmdb.open(str(path.parent), readonly=True, lock=False)
        try:
            used = (environment.info()["last_pgno"] + 1) * environment.stat()["psize"]
        finally:
            environment.close()
        return 0, min(size, used)
    if kind == "txn-journal-replayed":
        pointer = LocalCheckpointPointerFile(path.parent / "checkpoint").read()
        assert pointer is not None
        replayed = [p for p, h in _batch_starts(path) if h.next_offset > pointer.replay_from_offset]
        assert replayed, "the open transaction's records follow the checkpoint"
        return replayed[0], size
    return 0, size


def _batch_starts(path: Path) -> list[tuple[int, BatchHeader]]:
    data = path.read_bytes()
    found, position = [], 0
    while position < len(data):
        header = read_header(data, position)
        found.append((position, header))
        position += header.size_bytes
    return found


LMDB_PAGE_HEADER_BYTES = 16  # pgno, pad, flags, lower/upper (or overflow pages)


@dataclass(frozen=True)
class Damage:
    kind: str
    cut: bool  # truncate (else flip a bit)
    seed: int

    def apply(self, path: Path) -> str:
        rng = random.Random(f"{self.kind}/{self.cut}/{self.seed}")
        start, end = _damage_range(self.kind, path)
        if self.cut:
            length = rng.randrange(start, end)
            os.truncate(path, length)
            return f"cut {path.name} to {length} bytes"
        if self.kind == "lmdb-page-header":  # the header of a page in use: LMDB reads those
            page_bytes = 4096
            page = rng.randrange(end // page_bytes)
            position = page * page_bytes + rng.randrange(LMDB_PAGE_HEADER_BYTES)
        else:
            position = rng.randrange(start, end)
        bit = rng.randrange(8)
        with open(path, "r+b") as file:
            file.seek(position)
            byte = file.read(1)[0]
            file.seek(position)
            file.write(bytes([byte ^ (1 << bit)]))
        return f"flipped bit {bit} of byte {position} of {path.name}"


# LMDB keeps no checksums, and a page header it meets in a *write* with a wrong page
# number trips a C assertion (mdb_page_touch) that aborts the process. Since issue 12 the
# journal walks LMDB's trees at open and refuses such a page first (journal/lmdb_pages.py),
# so the lmdb-page-header flips must all end recovered or refused, never aborted.


def _cases() -> Iterator[object]:
    for kind in KINDS:
        for seed in range(FLIPS_PER_FILE):
            yield pytest.param(Damage(kind, False, seed), id=f"{kind}-flip{seed}")
        for seed in range(CUTS_PER_FILE):
            yield pytest.param(Damage(kind, True, seed), id=f"{kind}-cut{seed}")


# --- the check ----------------------------------------------------------------------------


def _outcome(directory: Path, damaged: Path, pristine: Pristine) -> str:
    """Open, read everything, commit the open transaction; 'recovered' or 'refused ...'.

    Fails the test otherwise. The open transaction's batches were acknowledged
    and wait in LMDB: its producer commits it, as an application would, and its
    records must then appear whole, or the commit (or its copy) must be refused.
    Never may the commit succeed with fewer records.
    """
    try:
        broker = Broker.open(directory, **CONFIG)
    except TwinlogError as error:
        _check_named(error, damaged)
        return f"refused at open: {type(error).__name__}: {error}"
    try:
        try:
            contents = _read_everything(broker)
        except TwinlogError as error:
            _check_named(error, damaged)
            return f"refused at read: {type(error).__name__}: {error}"
        expected = pristine.contents
        for where, (start, records) in expected.items():
            assert contents.get(where) == (start, records), f"{where} reads back differently"
        assert contents.keys() == expected.keys()
        return _commit_the_open_transaction(broker, damaged, pristine)
    finally:
        broker.close()


def _commit_the_open_transaction(broker: Broker, damaged: Path, pristine: Pristine) -> str:
    ends = {
        where: broker.list_offset(where.topic, where.partition, "latest") for where in OPEN_VALUES
    }
    identity = pristine.open_producer
    try:
        broker.commit_transaction(
            pristine.open_transaction_id, identity.producer_id, identity.producer_generation
        )
    except TransactionDataMissingError as error:  # the journal lost its batches
        assert damaged.name == "data.mdb", error
        return f"refused at commit: {type(error).__name__}: {error}"
    except (UnknownTransactionError, InvalidTxnStateError) as error:
        # The transaction journal lost the open transaction (its BEGIN was in a torn
        # tail): the producer learns it must begin again; nothing of it is visible.
        assert damaged.parent.name == "__txn_journal-0", error
        _assert_unchanged(broker, ends)
        return f"refused at commit: {type(error).__name__}: {error}"
    coordinator = broker.coordinator_manager.for_id(pristine.open_transaction_id)
    txn = coordinator.transaction(pristine.open_transaction_id)
    complete = txn is None or coordinator.wait_complete(txn, APPLY_WAIT_S)
    # A partition's copy is whole or absent; if one was refused (a damaged batch or index
    # row), the decision waits for the journal's repair, its other partitions applied.
    refused = []
    for where, values in OPEN_VALUES.items():
        fetched = broker.fetch(where.topic, where.partition, ends[where], max_bytes=1 << 20)
        applied = [r.value for b in iter_batches(fetched.records) for r in b.records()]
        if applied != values:
            assert not complete and applied == [], f"{where}: the commit applied {applied}"
            refused.append(where)
    if not complete:
        # Refused at the copy, or after it (the journal could not record it as applied:
        # the copies stay whole and are never repeated).
        assert txn is not None and txn.state is TransactionState.PREPARE_COMMIT, txn
        return f"refused at apply (not copied: {refused}): decided, waits for the journal's repair"
    return "recovered"


def _assert_unchanged(broker: Broker, ends: dict[TopicPartition, int]) -> None:
    for where, end in ends.items():
        now = broker.list_offset(where.topic, where.partition, "latest")
        assert now == end, f"{where}: the log end moved from {end} to {now}"


def _check_named(error: TwinlogError, damaged: Path) -> None:
    message = str(error)
    if damaged.name in ("data.mdb", "lock.mdb"):
        assert str(damaged.parent) in message, message  # LMDB names its environment
    else:
        assert str(damaged) in message, message
    if isinstance(error, CorruptLogError):
        assert error.path == str(damaged), (error.path, str(damaged))
        assert error.position >= 0, error.position


def _run_forked(directory: Path, damaged: Path, pristine: Pristine) -> str:
    """``_outcome`` in a forked child: a crash in C code fails the test, not pytest."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.close(read_end)
        status = 0
        try:
            text = _outcome(directory, damaged, pristine)
        except BaseException as error:  # reported to the parent, which fails the test
            text, status = f"FAILED: {type(error).__name__}: {error}", 1
        os.write(write_end, text.encode()[:60_000])
        os._exit(status)
    os.close(write_end)
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while True:
        done, wait_status = os.waitpid(child, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            pytest.fail(f"the broker process did not finish in {CHILD_TIMEOUT_S} s")
        time.sleep(0.01)
    with os.fdopen(read_end, "rb") as pipe:
        text = pipe.read().decode()
    if os.WIFSIGNALED(wait_status):
        name = signal.Signals(os.WTERMSIG(wait_status)).name
        pytest.fail(f"the broker process died of {name} on the damaged file")
    assert os.WEXITSTATUS(wait_status) == 0, text
    return text


@pytest.mark.parametrize("damage", list(_cases()))
def test_damaged_file(pristine: Pristine, tmp_path: Path, damage: Damage) -> None:
    directory = tmp_path / "data"
    shutil.copytree(pristine.directory, directory)
    damaged = _files(directory)[damage.kind]
    what = damage.apply(damaged)
    if damage.kind.startswith("lmdb"):
        outcome = _run_forked(directory, damaged, pristine)
    else:
        outcome = _outcome(directory, damaged, pristine)
    if damage.kind in DERIVED:
        assert outcome == "recovered", f"{what}: {outcome}"
    print(f"{damage.kind}: {what}: {outcome}")


# --- the pieces the policy rests on ----------------------------------------------------------


def test_checked_ranges_merge_cover_and_cut() -> None:
    from twinlog.engine.log.checked_ranges import CheckedRanges

    rng = random.Random(7)
    for _ in range(300):
        ranges, truth = CheckedRanges(), set()
        for _ in range(rng.randint(1, 12)):
            if rng.random() < 0.8:
                start = rng.randint(0, 50)
                end = start + rng.randint(0, 10)
                ranges.add(start, end)
                truth |= set(range(start, end))
            else:
                position = rng.randint(0, 60)
                ranges.cut(position)
                truth = {byte for byte in truth if byte < position}
            stored = ranges.ranges()
            assert {b for start, end in stored for b in range(start, end)} == truth
            assert all(left[1] < right[0] for left, right in pairwise(stored))
            start = rng.randint(0, 60)
            end = start + rng.randint(1, 10)
            assert ranges.covers(start, end) == (set(range(start, end)) <= truth)


def test_failpoint_windows_and_conditions(tmp_path: Path) -> None:
    from twinlog.engine.base import failpoints

    marker = tmp_path / "full"
    try:
        failpoints.arm("test.window", "enospc", on_hit=2, times=2)
        outcomes = []
        for _ in range(5):
            try:
                failpoints.hit("test.window")
                outcomes.append("ok")
            except OSError:
                outcomes.append("enospc")
        assert outcomes == ["ok", "enospc", "enospc", "ok", "ok"]
        failpoints.arm("test.file", "enospc", while_exists=marker)
        failpoints.hit("test.file")
        marker.touch()
        with pytest.raises(OSError, match="No space left"):
            failpoints.hit("test.file")
        marker.unlink()
        failpoints.hit("test.file")
        for bad in ("x=enospc?", "x=enospc@2?/tmp/f", "x=explode*2"):
            with pytest.raises(ValueError):
                failpoints._parse(bad)
    finally:
        failpoints.disarm_all()


def test_read_only_reader_refuses_a_bad_batch_followed_by_good_ones(tmp_path: Path) -> None:
    # What the Spark connector's path option reads: never a silent stop in the middle.
    from twinlog.engine.log import DataLog, LogConfig, LogReader

    with DataLog.open(tmp_path, LogConfig()) as log:
        for number in range(5):
            log.append_as_leader(batch([f"value-{number}".encode() * 5], codec="none", keyed=True))
    segment = next(tmp_path.glob("*.log"))
    data = bytearray(segment.read_bytes())
    middle = len(data) // 2
    data[middle] ^= 0x10
    segment.write_bytes(bytes(data))
    with pytest.raises(CorruptLogError, match="a valid batch follows") as caught:
        list(LogReader(tmp_path).iter_batches())
    assert caught.value.path == str(segment)
    data[middle] ^= 0x10  # undo the flip; a torn last batch alone is a quiet end
    segment.write_bytes(bytes(data[:-3]))
    assert len(list(LogReader(tmp_path).iter_batches())) == 4


def test_verified_recovery_point_past_the_end_refuses(tmp_path: Path) -> None:
    from twinlog.engine.log import DataLog, LogConfig

    with DataLog.open(tmp_path, LogConfig()) as log:
        for number in range(3):
            log.append_as_leader(batch([f"value-{number}".encode()], codec="none", keyed=True))
    segment = next(tmp_path.glob("*.log"))
    size = segment.stat().st_size
    os.truncate(segment, size - 20)
    with pytest.raises(CorruptLogError, match="acknowledged data is missing") as caught:
        DataLog.open(tmp_path, LogConfig())
    assert (caught.value.path, caught.value.position) == (str(segment), size - 20)
    (tmp_path / "recovery-point").unlink()  # the operator accepts the loss
    with DataLog.open(tmp_path, LogConfig()) as log:
        assert log.log_end_offset == 2


def test_a_flipped_sequence_bit_after_a_sigkill_is_caught_not_used(tmp_path: Path) -> None:
    # The producer-state snapshot written at close names the last batch, whose CRC the
    # flipped bit breaks: the snapshot is skipped, and the broker rebuilds its idempotence
    # table from the log, where the scan meets the damage. A flipped bit in a sequence
    # number there used to make the producer's next batch a "duplicate", acknowledged and
    # never stored.
    directory = tmp_path / "data"
    with Broker.open(directory, **CONFIG) as broker:
        broker.create_topic("seq", partitions=1)
        producer = broker.init_producer()
        for number in range(3):
            broker.produce("seq", 0, batch([f"v{number}".encode()], producer, number))
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        try:
            Broker.open(directory, **CONFIG)  # dies holding it open
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    _, wait_status = os.waitpid(child, 0)
    assert os.WIFSIGNALED(wait_status) and os.WTERMSIG(wait_status) == signal.SIGKILL
    segment = directory / "logs" / "seq-0" / "00000000000000000000.log"
    assert len(list(segment.parent.glob("producer-state-*.json"))) == 1  # close's, kept
    starts = _batch_starts(segment)
    last_position, last_header = starts[-1]
    data = bytearray(segment.read_bytes())
    marker = 0x5A5A5A5A  # where base_sequence lies, found from a batch carrying it
    sequence_field = batch([b"x"], producer, marker).index(marker.to_bytes(4, "big"))
    data[last_position + sequence_field + 3] ^= 0x04
    segment.write_bytes(bytes(data))
    assert read_header(data, last_position).base_sequence == last_header.base_sequence ^ 0x04
    with pytest.raises(CorruptLogError) as caught:  # never "sequence 3 is a duplicate"
        Broker.open(directory, **CONFIG)
    _check_named(caught.value, segment)
