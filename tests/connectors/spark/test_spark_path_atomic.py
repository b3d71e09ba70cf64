"""Reads with ``path`` (a live broker's files) end at the last whole transaction.

The copier applies a committed transaction by appending its batches to the data
log one by one (``append_all_as_leader``), and publishes them to the broker's readers at
once. A Spark query planned from the files at that moment must not end inside
the copy: it would read half a transaction, and the next query the other half.
The copier is paused at its failpoint ``copier.after_batch`` (after its second
batch) while the query's bounds are planned from the directory.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_support import batch

from twinlog.connectors.spark.log_access import DirectoryLogAccess
from twinlog.connectors.spark.options import READ_OPTIONS, Options
from twinlog.connectors.spark.planning import current_bounds
from twinlog.connectors.spark.subscription import parse_subscription
from twinlog.engine.base import failpoints
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker

PAUSE_AT = "copier.after_batch"
PAUSE_ON_HIT = 2
T0 = TopicPartition("t", 0)


class PausedCopier:
    """Stops the copier at its failpoint until released (the test's "pause" action)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reached = threading.Event()
        self.released = threading.Event()
        self.hits = 0
        real_hit = failpoints.hit

        def hit(name: str) -> None:
            if name == PAUSE_AT:
                self.hits += 1
                if self.hits == PAUSE_ON_HIT:
                    self.reached.set()
                    assert self.released.wait(30), "the test never released the copier"
            real_hit(name)

        monkeypatch.setattr(failpoints, "hit", hit)


@pytest.fixture
def paused(monkeypatch: pytest.MonkeyPatch) -> Iterator[PausedCopier]:
    copier = PausedCopier(monkeypatch)
    try:
        yield copier
    finally:
        copier.released.set()


def _committed_transaction(broker: Broker, batches: int) -> None:
    identity = broker.init_producer("app")
    transaction_id = broker.begin_transaction(identity.producer_id, identity.producer_generation)
    for n in range(batches):
        values = [b"txn-%d-%d" % (n, i) for i in range(3)]
        broker.produce(
            "t", 0, batch(values, identity, 3 * n, transaction_id), transaction_id=transaction_id
        )
    broker.commit_transaction(transaction_id, identity.producer_id, identity.producer_generation)


def test_a_path_read_planned_during_a_copy_ends_before_it(
    tmp_path: Path, paused: PausedCopier
) -> None:
    subscription = parse_subscription(Options({"subscribe": "t"}, READ_OPTIONS))
    with Broker.open(tmp_path, journal_partitions=1, offsets_partitions=1) as broker:
        broker.create_topic("t", 1)
        broker.produce("t", 0, batch([b"plain-0", b"plain-1"]))
        _committed_transaction(broker, batches=4)  # applied in the background
        assert paused.reached.wait(20), "the copier never reached its second batch"
        try:
            access = DirectoryLogAccess(str(tmp_path))
            assert current_bounds(access, subscription) == {T0: (0, 2)}
            assert access.describe("t") == [(0, 2)]
            # A read that starts at the end finds nothing past it yet.
            assert [h.base_offset for h, _ in access.batches(T0, 0, 2, True)] == [0]
        finally:
            paused.released.set()
        deadline_s = 20.0
        waited = threading.Event()
        while broker.list_transactions() and not waited.wait(0.02):
            deadline_s -= 0.02
            assert deadline_s > 0, "the copy did not finish"
        assert access.describe("t") == [(0, 14)]
        assert broker.describe_topic("t").partitions[0].log_end_offset == 14


def test_no_path_read_ends_inside_a_transaction_under_load(tmp_path: Path) -> None:
    # Transactions of 4 batches x 3 records are committed back to back while path
    # reads plan their ends from the files: every end is a multiple of 12.
    transactions = 60
    ends: list[int] = []
    with Broker.open(tmp_path, journal_partitions=1, offsets_partitions=1) as broker:
        broker.create_topic("t", 1)
        done = threading.Event()

        def plan_reads() -> None:
            access = DirectoryLogAccess(str(tmp_path))
            while not done.is_set():
                ends.append(access.describe("t")[0][1])

        reader = threading.Thread(target=plan_reads)
        reader.start()
        try:
            for _ in range(transactions):
                _committed_transaction(broker, batches=4)
        finally:
            while broker.list_transactions():
                threading.Event().wait(0.01)
            done.set()
            reader.join()
        assert broker.describe_topic("t").partitions[0].log_end_offset == 12 * transactions
    inside = [end for end in ends if end % 12]
    assert not inside, f"{len(inside)} of {len(ends)} planned ends inside a copy: {inside[:10]}"
    assert len(ends) > transactions
