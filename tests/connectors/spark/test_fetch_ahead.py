"""The read task's fetch ahead: where a fetch answer ends, and answers through BrokerLogAccess."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from twinlog.connectors.spark.errors import DataLossError
from twinlog.connectors.spark.fetch_ahead import FetchAhead, next_fetch_offset
from twinlog.connectors.spark.log_access import BrokerLogAccess
from twinlog.engine.base.errors import OffsetOutOfRangeError
from twinlog.engine.base.types import FetchResult, TopicPartition
from twinlog.engine.records.batch_builder import build_batch

T0 = TopicPartition("orders", 0)


def test_next_fetch_offset_is_after_the_last_whole_batch() -> None:
    first = bytearray(build_batch([b"a", b"b"], "none"))
    second = bytearray(build_batch([b"c", b"d", b"e"], "none"))
    second[0:8] = (2).to_bytes(8, "big")
    records = bytes(first + second)
    assert next_fetch_offset(records) == 5
    assert next_fetch_offset(records + bytes(second[:30])) == 5  # a cut tail is not counted
    assert next_fetch_offset(bytes(first[:20])) is None
    assert next_fetch_offset(b"") is None
    assert next_fetch_offset(b"\x00" * 8 + b"\xff" * 8) is None  # a damaged length


def test_an_answer_fetched_ahead_is_used_once_for_its_offset() -> None:
    asked: list[int] = []
    answered = threading.Event()

    def fetch(offset: int) -> FetchResult:
        asked.append(offset)
        answered.set()
        if offset == 99:
            raise OffsetOutOfRangeError("gone", 100, 200)
        return FetchResult(b"at %d" % offset, 0, 200)

    fetches = FetchAhead(fetch)
    fetches.ask_ahead(10)
    assert answered.wait(10)
    assert fetches.get(10).records == b"at 10"
    assert fetches.get(10).records == b"at 10"  # asked again: fetched again
    fetches.ask_ahead(20)
    assert fetches.get(30).records == b"at 30"  # not the offset asked ahead for
    fetches.ask_ahead(99)
    with pytest.raises(OffsetOutOfRangeError):
        fetches.get(99)  # the error of a fetch ahead is raised where its answer is taken
    fetches.close()
    assert sorted(asked) == [10, 10, 20, 30, 99]


class CountingBroker:
    """An embedded broker that counts fetches; a fetch at an offset of ``retention_at``
    finds the log starting at the offset it maps to (retention ran meanwhile)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.fetched_at: list[int] = []
        self.retention_at: dict[int, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.broker, name)

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int) -> Any:
        self.fetched_at.append(offset)
        if offset in self.retention_at:
            raise OffsetOutOfRangeError("below the start", self.retention_at[offset], 40)
        return self.broker.fetch(topic, partition, offset, max_bytes)


def test_broker_access_reads_every_batch_through_many_fetches(tmp_path: Path) -> None:
    from twinlog.engine.broker.broker import Broker

    with Broker.open(tmp_path) as broker:
        broker.create_topic("orders", 1)
        for step in range(8):
            broker.produce("orders", 0, build_batch([b"%d" % step * 100] * 5, "none"))
        counting = CountingBroker(broker)
        # A fetch answers at least one batch: 200 bytes answer one batch each time.
        access = BrokerLogAccess(counting, 200)  # type: ignore[arg-type]
        items = list(access.batches(T0, 7, 33, True))
        assert [header.base_offset for header, _ in items] == [5, 10, 15, 20, 25, 30]
        # each offset fetched once (ahead or not), nothing at or past the range's end
        assert sorted(counting.fetched_at) == [7, 10, 15, 20, 25, 30]
        # A fetch ahead that finds the log start moved on is data loss, as a fetch in turn.
        counting.retention_at = {15: 25}
        with pytest.raises(DataLossError, match=r"offsets 15\.\.24 are below its log start 25"):
            list(access.batches(T0, 10, 40, True))
        skipped = [h.base_offset for h, _ in access.batches(T0, 10, 40, False)]
        assert skipped == [10, 25, 30, 35]
