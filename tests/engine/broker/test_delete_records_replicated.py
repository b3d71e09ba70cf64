"""DeleteRecords on three cluster brokers in one process: only the leader deletes, its
followers take its new log start from their fetch answers (never past their own high
watermark), and a new leader keeps it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_support import batch
from replication_support import TOPIC, Cluster

from twinlog.engine.base.errors import NotLeaderOrFollowerError, OffsetOutOfRangeError
from twinlog.engine.replication.fetch_calls import FetchedPartition, LogKind

WAIT_S = 10.0


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    opened = Cluster(tmp_path, replica_ack_timeout_ms=5000, replica_lag_time_max_ms=4000)
    yield opened
    opened.close()


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_followers_take_the_leaders_new_log_start(cluster: Cluster) -> None:
    cluster.roles(leader=1, epoch=1)
    cluster.start_pumping()
    for number in range(10):
        cluster.brokers[1].produce(TOPIC.topic, 0, batch([b"v%d" % number]))
    with pytest.raises(NotLeaderOrFollowerError, match="leader: broker 1"):
        cluster.brokers[2].delete_records(TOPIC.topic, 0, 5)
    assert cluster.brokers[1].delete_records(TOPIC.topic, 0, 5) == 5
    _wait_for(
        lambda: all(cluster.partition(b).log.log_start_offset == 5 for b in (2, 3)),
        "the followers' log start",
    )
    cluster.stop_pumping()
    assert cluster.log_bytes(1) == cluster.log_bytes(2) == cluster.log_bytes(3)
    cluster.roles(leader=2, epoch=2)  # the new leader starts where the old one did
    cluster.start_pumping()
    assert cluster.brokers[2].list_offset(TOPIC.topic, 0, "earliest") == 5
    with pytest.raises(OffsetOutOfRangeError):
        cluster.brokers[2].fetch(TOPIC.topic, 0, 4)
    assert cluster.brokers[2].delete_records(TOPIC.topic, 0, -1) == 10
    _wait_for(
        lambda: all(cluster.partition(b).log.log_start_offset == 10 for b in (1, 3)),
        "the followers' log start after the failover",
    )


def test_a_follower_never_starts_past_its_own_high_watermark(cluster: Cluster) -> None:
    cluster.roles(leader=1, epoch=1)
    cluster.start_pumping()
    for number in range(4):
        cluster.brokers[1].produce(TOPIC.topic, 0, batch([b"v%d" % number]))
    cluster.stop_pumping()
    cluster.pump_once()  # the followers learn the high watermark 4
    # A produce waits for its acknowledgement: one pump copies it without telling the
    # followers it is committed (the answer's high watermark is the leader's before it).
    producing = threading.Thread(
        target=lambda: cluster.brokers[1].produce(TOPIC.topic, 0, batch([b"late"]))
    )
    producing.start()
    follower = cluster.partition(2)
    _wait_for(lambda: cluster.partition(1).log.log_end_offset == 5, "the late batch")
    cluster.pump_once()
    assert follower.log.log_end_offset == 5 and follower.high_watermark.value == 4
    # A leader's answer naming a start past what this follower knows to be committed.
    follower.apply_fetched(
        FetchedPartition(TOPIC, b"", 4, log_start_offset=5, log_end_offset=5, log=LogKind.DATA),
        leader_id=1,
    )
    assert follower.log.log_start_offset == 4
    cluster.start_pumping()
    producing.join(WAIT_S)
    assert not producing.is_alive()
