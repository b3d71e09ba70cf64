"""Reads that decompress stored batches share the broker-wide decompression budget with
produce checks: ListOffsets by timestamp and compaction reserve what a batch decompresses
to while they hold it, and a spent budget refuses them as retriable, changing nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from twinlog.engine.base.errors import NotEnoughResourcesError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.decompression_budget import DecompressionBudget

VALUE = b"v" * 4000  # gzip declares no size: the section is counted, then reserved
RECORDS = 50
SECTION_BYTES_MIN = RECORDS * len(VALUE)


def gzip_batch(keys: list[bytes], timestamp_ms: int) -> bytes:
    builder = RecordBatchBuilder("gzip")
    for key in keys:
        builder.append(VALUE, key=key, timestamp_ms=timestamp_ms)
    return builder.build()


@contextmanager
def spent(budget: DecompressionBudget) -> Iterator[None]:
    """Another holder takes the whole budget (the reader's wait is cut to 0.1 s)."""
    budget.wait_ms = 100
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with budget.reserve(budget.bytes_max):
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(5)
    try:
        yield
    finally:
        release.set()
        holder.join(5)


def test_list_offsets_by_timestamp_reserves_what_the_batch_decompresses_to(
    tmp_path: Path,
) -> None:
    with Broker.open(tmp_path) as broker:
        broker.create_topic("t", 1)
        broker.produce("t", 0, gzip_batch([b"k%d" % i for i in range(RECORDS)], 1_000))
    with Broker.open(tmp_path) as broker:  # a fresh budget: nothing reserved yet
        budget = broker.decompression_budget
        assert budget.peak_reserved_bytes == 0
        assert broker.record_for_timestamp("t", 0, 500) == (0, 1_000)
        assert budget.peak_reserved_bytes >= SECTION_BYTES_MIN
        assert budget.reserved_bytes == 0
        with spent(budget):
            with pytest.raises(NotEnoughResourcesError) as refused:
                broker.list_offset("t", 0, 500)
            assert refused.value.retriable
        assert broker.list_offset("t", 0, 500) == 0  # room again: answered


def test_compaction_reserves_each_batch_and_a_spent_budget_changes_nothing(
    tmp_path: Path,
) -> None:
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "0",
    }
    keys = [b"k%d" % i for i in range(RECORDS)]
    with Broker.open(tmp_path) as broker:
        broker.create_topic("c", 1, config)
        for round_number in range(4):  # the same keys again: all but the last are dropped
            broker.produce("c", 0, gzip_batch(keys, round_number))
    with Broker.open(tmp_path) as broker:  # a fresh budget: nothing reserved yet
        partition = broker.partition(TopicPartition("c", 0))
        budget = broker.decompression_budget
        size_before = partition.log.size_bytes()
        broker.scheduler.run_round("compaction")  # as the broker's background task runs it
        assert partition.log.size_bytes() < size_before
        assert budget.peak_reserved_bytes >= SECTION_BYTES_MIN
        assert budget.reserved_bytes == 0

        for round_number in range(4, 8):
            broker.produce("c", 0, gzip_batch(keys, round_number))
        size_before = partition.log.size_bytes()
        with spent(budget), pytest.raises(NotEnoughResourcesError):
            partition.compact_log(budget=budget)
        assert partition.log.size_bytes() == size_before
        assert partition.compact_log(budget=budget).records_dropped > 0
