"""A transaction's partitions are applied side by side: the completing thread applies the
first one itself and the pool the rest, and every call has finished before an error is
raised (a retry must never run beside a call still in progress on the same partition)."""

from __future__ import annotations

import threading
import time

import pytest
from completion_support import completion_worker, prepared_commit

from twinlog.engine.base.errors import NotLeaderOrFollowerError
from twinlog.engine.base.types import TopicPartition, TransactionState
from twinlog.engine.transactions.coordinator_completion import CompletionWorker
from twinlog.engine.transactions.partition_calls import (
    ApplyAbort,
    ApplyCommit,
    CountEntries,
    EntryCount,
)
from twinlog.engine.transactions.transaction_metadata import TransactionMetadata

PARTITIONS = [TopicPartition("t", number) for number in range(4)]
SLOW_S = 0.2


class RecordingLeaders:
    """Partition leaders that note which thread applied each partition and when it ended;
    ``failing`` raises at once, ``slow`` takes SLOW_S."""

    def __init__(self, failing: TopicPartition | None = None, slow: bool = False) -> None:
        self.failing = failing
        self.slow = slow
        self.lock = threading.Lock()
        self.threads: dict[TopicPartition, int] = {}
        self.ended_s: dict[TopicPartition, float] = {}

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        return 1

    def count_entries(self, request: CountEntries) -> EntryCount:
        return EntryCount(1)

    def apply_commit(self, request: ApplyCommit) -> None:
        with self.lock:
            self.threads[request.topic_partition] = threading.get_ident()
        if request.topic_partition == self.failing:
            raise NotLeaderOrFollowerError(f"{request.topic_partition}: no live leader is known")
        if self.slow:
            time.sleep(SLOW_S)
        with self.lock:
            self.ended_s[request.topic_partition] = time.monotonic()

    def apply_abort(self, request: ApplyAbort) -> None:
        raise AssertionError("a committed transaction is never aborted")


def _worker(leaders: RecordingLeaders) -> tuple[CompletionWorker, TransactionMetadata]:
    txn = prepared_commit(PARTITIONS)
    return completion_worker(leaders, txn), txn


def test_the_calling_thread_applies_the_first_partition_and_the_pool_the_rest() -> None:
    leaders = RecordingLeaders()
    worker, txn = _worker(leaders)
    try:
        worker.complete(txn)
    finally:
        worker.close()
    assert txn.state is TransactionState.COMMITTED
    assert set(leaders.ended_s) == set(PARTITIONS)
    assert leaders.threads[PARTITIONS[0]] == threading.get_ident()
    assert threading.get_ident() not in {leaders.threads[p] for p in PARTITIONS[1:]}


def test_the_first_partitions_failure_is_raised_after_the_others_finished() -> None:
    leaders = RecordingLeaders(failing=PARTITIONS[0], slow=True)
    worker, txn = _worker(leaders)
    try:
        with pytest.raises(NotLeaderOrFollowerError):
            worker.complete(txn)
        raised_s = time.monotonic()
    finally:
        worker.close()
    assert set(leaders.ended_s) == set(PARTITIONS[1:])  # each finished...
    assert max(leaders.ended_s.values()) <= raised_s  # ...before the error reached the caller
    assert txn.state is TransactionState.PREPARE_COMMIT  # not completed: retried later
