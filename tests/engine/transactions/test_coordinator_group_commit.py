"""Group commit of the transaction journal: the decisions of many producers share one fsync,
no lock is held across it, and nothing is answered or applied before it."""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest
from coordinator_support import A0, B1, RecordingApplier, make
from fsync_support import HeldFsync

import twinlog.engine.log.segment_list as segment_list_module
from twinlog.engine.base.errors import LogClosedError
from twinlog.engine.base.types import TopicPartition, TransactionState
from twinlog.engine.transactions.coordinator import Coordinator
from twinlog.engine.transactions.partition_calls import (
    CallEpochs,
    CountEntries,
    EntryCount,
    RegisterPartition,
)

WAIT_S = 10
PRODUCERS = 6


def _wait_until(condition: object, timeout_s: float = WAIT_S) -> bool:
    done = threading.Event()
    for _ in range(int(timeout_s / 0.01)):
        if condition():  # type: ignore[operator]
            return True
        done.wait(0.01)
    return False


def test_commits_of_many_producers_share_one_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    coordinator, _ = make(tmp_path)
    opened = []
    for n in range(PRODUCERS):
        producer = coordinator.init_producer(f"app-{n}", 60_000)
        ids = producer.producer_id, producer.producer_generation
        transaction_id = coordinator.begin(*ids)
        coordinator.add_partitions(transaction_id, *ids, [A0])
        opened.append((transaction_id, *ids))
    coordinator.journal.wait_durable(coordinator.journal.end_offset)
    fsyncs = HeldFsync(monkeypatch)
    committed: list[int] = []

    def commit(n: int) -> None:
        coordinator.commit(*opened[n])
        committed.append(n)

    end_before = coordinator.journal.end_offset
    threads = [threading.Thread(target=commit, args=(n,)) for n in range(PRODUCERS)]
    threads[0].start()
    assert fsyncs.entered.wait(WAIT_S)  # the first PREPARE_COMMIT's fsync is held
    for thread in threads[1:]:
        thread.start()
    # The others journal their PREPARE_COMMITs meanwhile: the coordinator's lock is not
    # held across the fsync. None of them is answered before its record is durable.
    assert _wait_until(lambda: coordinator.journal.end_offset == end_before + PRODUCERS)
    assert committed == []
    fsyncs.release.set()
    for thread in threads:
        thread.join(WAIT_S)
    assert sorted(committed) == list(range(PRODUCERS))
    assert fsyncs.count == 2  # the held one, and one for the five written behind it
    coordinator.close()


def test_begin_answers_before_its_fsync_and_a_batch_registers_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    coordinator, _ = make(tmp_path)
    producer = coordinator.init_producer("app", 60_000)
    ids = producer.producer_id, producer.producer_generation
    fsyncs = HeldFsync(monkeypatch)
    transaction_id = coordinator.begin(*ids)  # nothing durable promised: no fsync waited for
    coordinator.add_partitions(transaction_id, *ids, [A0])
    assert fsyncs.count == 0
    registered = threading.Event()

    def register() -> None:
        coordinator.register_partition(
            RegisterPartition(transaction_id, A0, *ids, CallEpochs(0, 0, 0))
        )
        registered.set()

    registering = threading.Thread(target=register)
    registering.start()
    assert fsyncs.entered.wait(WAIT_S)
    # The partition may not journal a batch of a transaction whose BEGIN could be lost.
    assert not registered.wait(0.2)
    fsyncs.release.set()
    assert registered.wait(WAIT_S)
    registering.join(WAIT_S)
    coordinator.close()


def test_a_commit_is_applied_only_once_its_decision_is_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    applier = RecordingApplier()
    coordinator, _ = make(tmp_path, applier)
    producer = coordinator.init_producer("app", 60_000)
    ids = producer.producer_id, producer.producer_generation
    transaction_id = coordinator.begin(*ids)
    coordinator.add_partitions(transaction_id, *ids, [A0])
    fsyncs = HeldFsync(monkeypatch)
    committer = threading.Thread(target=coordinator.commit, args=(transaction_id, *ids))
    committer.start()
    assert fsyncs.entered.wait(WAIT_S)  # PREPARE_COMMIT written, its fsync held
    txn = coordinator.transaction(transaction_id)
    assert txn is not None and txn.state is TransactionState.PREPARE_COMMIT
    threading.Event().wait(0.2)
    assert applier.calls == []  # no partition copies a decision that could still be lost
    fsyncs.release.set()
    committer.join(WAIT_S)
    assert _wait_until(lambda: ("commit", A0, transaction_id) in applier.calls)
    coordinator.close()


def test_a_failed_fsync_fails_the_request_and_refuses_every_later_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    coordinator, _ = make(tmp_path)
    producer = coordinator.init_producer("app", 60_000)
    ids = producer.producer_id, producer.producer_generation

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "input/output error")

    monkeypatch.setattr(segment_list_module, "fsync_segment_fd", failing_fsync)
    with pytest.raises(OSError, match="input/output"):
        coordinator.init_producer("other", 60_000)
    # Memory holds an INIT_PRODUCER the disk may not: nothing more is written on top of it.
    with pytest.raises(LogClosedError, match=r"could not be made durable.*open it again"):
        coordinator.begin(*ids)
    coordinator.abandon()


def test_the_low_watermark_moves_past_a_transaction_only_once_its_end_is_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partitions drop journal rows below the low watermark: were it published on a
    COMMITTED a crash could take, the redone completion would find its rows gone."""
    coordinator, _ = make(tmp_path, adoption_window_ms=0)  # (lost BEGINs: their own test)
    producer = coordinator.init_producer("app", 60_000)
    ids = producer.producer_id, producer.producer_generation
    transaction_id = coordinator.begin(*ids)
    coordinator.add_partitions(transaction_id, *ids, [A0])
    fsyncs = HeldFsync(monkeypatch)
    fsyncs.release.set()  # the commit's PREPARE_COMMIT goes through
    coordinator.commit(transaction_id, *ids)
    txn = coordinator.transaction(transaction_id)
    assert txn is not None and coordinator.wait_complete(txn, WAIT_S)  # COMMITTED, written
    fsyncs.entered.clear()
    fsyncs.release.clear()  # ... and its fsync is held
    answers: list[int] = []
    reader = threading.Thread(target=lambda: answers.append(coordinator.current_low_watermark()))
    reader.start()
    assert fsyncs.entered.wait(WAIT_S)
    assert answers == []
    fsyncs.release.set()
    reader.join(WAIT_S)
    assert answers and answers[0] > transaction_id
    coordinator.close()


class MeetingApplier(RecordingApplier):
    """count_entries on A0 returns only once B1's has begun: one after another, it never
    would."""

    def __init__(self) -> None:
        super().__init__()
        self.b1_counting = threading.Event()

    def count_entries(self, request: CountEntries) -> EntryCount:
        if request.topic_partition == B1:
            self.b1_counting.set()
        elif not self.b1_counting.wait(WAIT_S):
            raise AssertionError("the partitions were counted one after another")
        return super().count_entries(request)


def test_a_commit_counts_its_partitions_side_by_side(tmp_path: Path) -> None:
    """On a cluster most partitions are led elsewhere: one round trip for all of them."""
    coordinator, applier = make(tmp_path, MeetingApplier())
    producer = coordinator.init_producer("app", 60_000)
    ids = producer.producer_id, producer.producer_generation
    transaction_id = coordinator.begin(*ids)
    coordinator.add_partitions(transaction_id, *ids, [A0, B1])
    coordinator.commit(transaction_id, *ids)
    assert _wait_until(lambda: len(applier.calls) == 2)
    coordinator.close()


def _commit_on_a0_and_b1(coordinator: Coordinator) -> None:
    producer = coordinator.init_producer("app", 60_000)
    ids = producer.producer_id, producer.producer_generation
    transaction_id = coordinator.begin(*ids)
    coordinator.add_partitions(transaction_id, *ids, [A0, B1])
    coordinator.commit(transaction_id, *ids)


class HalfHereApplier(MeetingApplier):
    """A0 is led here, B1 elsewhere: each count notes the thread it ran on."""

    def __init__(self) -> None:
        super().__init__()
        self.counted_on: dict[TopicPartition, int] = {}

    def leads_here(self, topic_partition: TopicPartition) -> bool:
        return topic_partition == A0

    def count_entries(self, request: CountEntries) -> EntryCount:
        self.counted_on[request.topic_partition] = threading.get_ident()
        return super().count_entries(request)


def test_partitions_led_here_are_counted_in_line_and_the_others_side_by_side(
    tmp_path: Path,
) -> None:
    """A local count is a freeze and a read of the local journal: a thread hop would cost
    more than it; the remote one still runs meanwhile (A0's count waits for B1's)."""
    coordinator, applier = make(tmp_path, HalfHereApplier())
    assert isinstance(applier, HalfHereApplier)
    _commit_on_a0_and_b1(coordinator)
    assert applier.counted_on[A0] == threading.get_ident()
    assert applier.counted_on[B1] != threading.get_ident()
    assert _wait_until(lambda: len(applier.calls) == 2)
    coordinator.close()


class AllHereApplier(HalfHereApplier):
    def leads_here(self, topic_partition: TopicPartition) -> bool:
        return True

    def count_entries(self, request: CountEntries) -> EntryCount:
        self.counted_on[request.topic_partition] = threading.get_ident()
        return RecordingApplier.count_entries(self, request)


def test_a_commit_whose_partitions_are_all_led_here_starts_no_thread(tmp_path: Path) -> None:
    coordinator, applier = make(tmp_path, AllHereApplier())
    assert isinstance(applier, AllHereApplier)
    _commit_on_a0_and_b1(coordinator)
    assert set(applier.counted_on.values()) == {threading.get_ident()}
    assert _wait_until(lambda: len(applier.calls) == 2)
    coordinator.close()
