"""A committed transaction whose partition has no leader for a while is applied soon after
the partition is served again: a retriable failure is retried at least every second, not
after a delay doubled up to 30 s (which left a committed transaction unreadable for that
long after a failover)."""

from __future__ import annotations

import threading
import time

from completion_support import TRANSACTION_ID, completion_worker, prepared_commit

from twinlog.engine.base.backoff import Backoff
from twinlog.engine.base.errors import NotLeaderOrFollowerError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.transactions.coordinator_completion import (
    COMPLETION_BACKOFF,
    COMPLETION_RETRY_S_MAX,
    RETRIABLE_BACKOFF,
    RETRIABLE_RETRY_S_MAX,
    retry_delay_s,
)
from twinlog.engine.transactions.partition_calls import (
    ApplyAbort,
    ApplyCommit,
    CountEntries,
    EntryCount,
)

PARTITION = TopicPartition("t", 2)
# Failures at 0.01 * (2**n - 1) s: with the delay doubled beyond a second, the last failure
# before the partition is back (2.55 s) would be retried at 5.11 s, 2.5 s late.
LEADERLESS_S = 2.6


class LeaderlessFor:
    """Partition leaders whose one partition has no leader until ``back_at_s``."""

    def __init__(self, back_at_s: float) -> None:
        self.back_at_s = back_at_s
        self.applied_at_s: float | None = None
        self.applied = threading.Event()

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        return 1

    def count_entries(self, request: CountEntries) -> EntryCount:
        return EntryCount(1)

    def apply_commit(self, request: ApplyCommit) -> None:
        if time.monotonic() < self.back_at_s:
            raise NotLeaderOrFollowerError(f"{request.topic_partition}: no live leader is known")
        self.applied_at_s = time.monotonic()
        self.applied.set()

    def apply_abort(self, request: ApplyAbort) -> None:
        raise AssertionError("a committed transaction is never aborted")


def test_a_committed_transaction_is_applied_within_a_second_of_its_partition_being_back() -> None:
    txn = prepared_commit([PARTITION])
    leaders = LeaderlessFor(back_at_s=time.monotonic() + LEADERLESS_S)
    worker = completion_worker(leaders, txn)
    worker.start()
    worker.queue(TRANSACTION_ID)
    try:
        assert leaders.applied.wait(LEADERLESS_S + RETRIABLE_RETRY_S_MAX + 5)
        assert leaders.applied_at_s is not None
        late_s = leaders.applied_at_s - leaders.back_at_s
        assert late_s <= RETRIABLE_RETRY_S_MAX + 0.8, f"applied {late_s:.2f} s after"
    finally:
        worker.close()


def test_the_retry_delays_double_to_their_ceilings_and_stay_there() -> None:
    """The one backoff policy with the worker's numbers. A retriable failure reaches its
    ceiling of a second after 8 failures and stays there: counted past a thousand (a
    partition leaderless for 17 minutes), the delay is still a second (2 ** 1024 once
    overflowed a float, and the exception ended the worker's thread)."""
    assert RETRIABLE_BACKOFF == Backoff(10, 1_000, jitter=0)
    assert COMPLETION_BACKOFF == Backoff(10, 30_000, jitter=0)
    assert [retry_delay_s(n, retriable=True) for n in (1, 2, 7, 8)] == [0.01, 0.02, 0.64, 1.0]
    assert retry_delay_s(1_100, retriable=True) == RETRIABLE_RETRY_S_MAX
    assert retry_delay_s(12, retriable=False) == 20.48
    assert retry_delay_s(1_000_000, retriable=False) == COMPLETION_RETRY_S_MAX == 30.0
