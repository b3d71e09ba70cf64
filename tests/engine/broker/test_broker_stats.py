"""``Broker.stats()``: the figures a server exports, read from a real embedded broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_support import batch

from twinlog.engine.base import fsync_latency
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.broker_stats import group_lags, open_transaction_figures

ORDERS_0 = TopicPartition("orders", 0)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker.open(tmp_path / "data") as opened:
        opened.create_topic("orders", partitions=2)
        yield opened


def partition_of(broker: Broker, topic_partition: TopicPartition) -> tuple[int, int, int]:
    found = [p for p in broker.stats().partitions if p.topic_partition == topic_partition]
    assert len(found) == 1
    return found[0].log_start_offset, found[0].log_end_offset, found[0].size_bytes


def test_an_idle_broker_reports_nothing_open_and_empty_logs(broker: Broker) -> None:
    stats = broker.stats()
    assert (stats.open_transactions, stats.oldest_open_transaction_age_s) == (0, 0.0)
    assert stats.commit_latency.count == stats.apply_latency.count == 0
    assert partition_of(broker, ORDERS_0) == (0, 0, 0)
    assert stats.group_lags == ()
    assert stats.journal_used_bytes > 0 and stats.journal_map_bytes >= stats.journal_used_bytes
    assert set(stats.fsync_latency) == {"log_segment", "local_journal"}


def test_plain_produce_moves_log_end_size_and_segment_fsyncs(broker: Broker) -> None:
    fsyncs_before = fsync_latency.LOG_SEGMENT.snapshot().count
    broker.produce("orders", 0, batch([b"a", b"b", b"c"]))
    start, end, size_bytes = partition_of(broker, ORDERS_0)
    assert (start, end) == (0, 3) and size_bytes > 0
    assert broker.stats().fsync_latency["log_segment"].count > fsyncs_before  # every_append


def test_a_transaction_is_open_then_timed_through_commit_and_apply(broker: Broker) -> None:
    identity = broker.init_producer("loader")
    journal_fsyncs_before = fsync_latency.LOCAL_JOURNAL.snapshot().count
    transaction_id = broker.begin_transaction(identity.producer_id, identity.producer_generation)
    broker.produce(
        "orders", 1, batch([b"x", b"y"], identity, 0, transaction_id), transaction_id=transaction_id
    )
    during = broker.stats()
    assert during.open_transactions == 1
    assert 0 <= during.oldest_open_transaction_age_s < 60
    assert during.journal_entries >= 1
    assert during.fsync_latency["local_journal"].count > journal_fsyncs_before
    broker.commit_transaction(
        transaction_id, identity.producer_id, identity.producer_generation, wait_for_applied=True
    )
    after = broker.stats()
    assert after.open_transactions == 0
    assert after.commit_latency.count == 1 and after.commit_latency.sum_s > 0
    assert after.apply_latency.count == 1 and after.apply_latency.sum_s > 0
    assert partition_of(broker, TopicPartition("orders", 1))[1] == 2
    assert after.transaction_journal_bytes > 0


def test_an_aborted_transaction_is_no_commit_and_no_apply(broker: Broker) -> None:
    identity = broker.init_producer("loader")
    transaction_id = broker.begin_transaction(identity.producer_id, identity.producer_generation)
    broker.produce(
        "orders", 1, batch([b"x"], identity, 0, transaction_id), transaction_id=transaction_id
    )
    broker.abort_transaction(
        transaction_id, identity.producer_id, identity.producer_generation, wait_for_applied=True
    )
    stats = broker.stats()
    assert (stats.commit_latency.count, stats.apply_latency.count) == (0, 0)
    assert stats.open_transactions == 0


def test_consumer_lag_is_log_end_minus_committed_offset(broker: Broker) -> None:
    broker.produce("orders", 0, batch([b"1", b"2", b"3", b"4", b"5"]))
    broker.commit_offsets("billing", {ORDERS_0: 2})
    broker.commit_offsets("audit", {ORDERS_0: 5})
    lags = {(lag.group_id, lag.topic_partition): lag for lag in broker.stats().group_lags}
    assert lags[("billing", ORDERS_0)].lag == 3
    assert lags[("billing", ORDERS_0)].committed_offset == 2
    assert lags[("audit", ORDERS_0)].lag == 0


def test_lag_skips_deleted_partitions_and_never_goes_negative() -> None:
    gone = TopicPartition("gone", 0)
    lags = group_lags({("g", ORDERS_0): 9, ("g", gone): 1}, {ORDERS_0: 4})
    assert [(lag.topic_partition, lag.lag) for lag in lags] == [(ORDERS_0, 0)]


def test_oldest_age_is_measured_from_the_earliest_start() -> None:
    assert open_transaction_figures([9_000, 4_000], now=10_000) == (2, 6.0)
    assert open_transaction_figures([], now=10_000) == (0, 0.0)


def test_a_closed_broker_refuses_stats(tmp_path: Path) -> None:
    broker = Broker.open(tmp_path / "data")
    broker.close()
    with pytest.raises(Exception, match="closed"):
        broker.stats()
