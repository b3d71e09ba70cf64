"""Three cluster brokers in one process, their followers' fetches handed over directly (no
transport, no ZooKeeper): acks=all waits for the in-sync replicas, replicas stay
byte-identical, a deposed leader's unacknowledged suffix is cut (KIP-101), an idempotent
retry at the new leader is not written twice, and the ISR shrinks and grows (KIP-497)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_support import batch
from log_support import read_all
from replication_support import BROKER_IDS, EPOCHS, TOPIC, Cluster

from twinlog.engine.base.errors import (
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
)
from twinlog.engine.base.types import ProducerIdentity
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_reader import iter_batches


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    opened = Cluster(tmp_path, replica_ack_timeout_ms=2000, replica_lag_time_max_ms=400)
    yield opened
    opened.close()


def test_acks_all_waits_for_every_in_sync_replica(cluster: Cluster) -> None:
    cluster.roles(leader=1, epoch=1)
    cluster.start_pumping()
    for number in range(5):
        cluster.brokers[1].produce(TOPIC.topic, 0, batch([b"v%d" % number]))
    leader_partition = cluster.brokers[1].partition(TOPIC)
    assert leader_partition.high_watermark.value == 5  # acknowledged means replicated
    cluster.stop_pumping()
    cluster.pump_once()  # the followers learn the last high watermark
    assert cluster.log_bytes(2) == cluster.log_bytes(1) == cluster.log_bytes(3)
    for follower in (2, 3):
        assert cluster.brokers[follower].partition(TOPIC).high_watermark.value == 5
        with pytest.raises(NotLeaderOrFollowerError, match="leader: broker 1"):
            cluster.brokers[follower].fetch(TOPIC.topic, 0, 0)
        with pytest.raises(NotLeaderOrFollowerError):
            cluster.brokers[follower].produce(TOPIC.topic, 0, batch([b"x"]))
    assert cluster.brokers[1].fetch(TOPIC.topic, 0, 0).log_end_offset == 5  # the HW


def test_a_partition_serves_nothing_before_its_role_arrives(cluster: Cluster) -> None:
    with pytest.raises(NotLeaderOrFollowerError, match="not known yet"):
        cluster.brokers[1].produce(TOPIC.topic, 0, batch([b"x"]))


def test_below_min_isr_nothing_is_written(cluster: Cluster) -> None:
    cluster.roles(leader=1, epoch=1, isr=(1,))
    with pytest.raises(NotEnoughReplicasError, match="below min_insync_replicas 2"):
        cluster.brokers[1].produce(TOPIC.topic, 0, batch([b"x"]))
    assert cluster.brokers[1].partition(TOPIC).log.log_end_offset == 0


def test_an_unacknowledged_write_times_out_and_is_cut_after_failover(cluster: Cluster) -> None:
    cluster.roles(leader=1, epoch=1)
    cluster.start_pumping()
    cluster.brokers[1].produce(TOPIC.topic, 0, batch([b"kept"]))
    cluster.stop_pumping()
    with pytest.raises(NotEnoughReplicasAfterAppendError, match="did not acknowledge"):
        cluster.brokers[1].produce(TOPIC.topic, 0, batch([b"never acknowledged"]))
    assert cluster.brokers[1].partition(TOPIC).log.log_end_offset == 2
    cluster.roles(leader=2, epoch=2, isr=(2, 3))  # the controller moved leadership
    cluster.start_pumping()
    cluster.brokers[2].produce(TOPIC.topic, 0, batch([b"new leader"]))
    deadline = time.monotonic() + 5
    while cluster.log_bytes(1) != cluster.log_bytes(2) and time.monotonic() < deadline:
        time.sleep(0.01)
    cluster.stop_pumping()
    assert cluster.log_bytes(1) == cluster.log_bytes(2) == cluster.log_bytes(3)
    values = [v for _, v in _values(cluster.brokers[2])]
    assert values == [b"kept", b"new leader"]


def test_an_idempotent_retry_at_the_new_leader_is_not_written_twice(cluster: Cluster) -> None:
    identity = ProducerIdentity(producer_id=7, producer_generation=0)
    cluster.roles(leader=1, epoch=1)
    cluster.start_pumping()
    first = cluster.brokers[1].produce(TOPIC.topic, 0, batch([b"once"], identity, sequence=0))
    cluster.stop_pumping()
    cluster.roles(leader=2, epoch=2, isr=(2, 3))
    cluster.start_pumping()
    # The producer never saw the answer (the old leader died): it retries at the new one.
    retried = cluster.brokers[2].produce(TOPIC.topic, 0, batch([b"once"], identity, sequence=0))
    assert retried.duplicate and retried.base_offset == first.base_offset
    assert [v for _, v in _values(cluster.brokers[2])] == [b"once"]


def test_a_lagging_follower_leaves_the_isr_and_rejoins_when_caught_up(cluster: Cluster) -> None:
    cluster.roles(leader=1, epoch=1)
    cluster.cut = {3}
    cluster.start_pumping()
    leader = cluster.brokers[1]
    time.sleep(0.5)  # past replica_lag_time_max_ms without a fetch from 3
    changes = leader.isr_changes_due(EPOCHS)
    assert [(tp, epoch, sorted(change.isr)) for tp, epoch, change in changes] == [
        (TOPIC, 1, [1, 2])
    ]
    leader.isr_change_done(TOPIC, changes[0][2].isr)  # written to ZooKeeper
    leader.produce(TOPIC.topic, 0, batch([b"without 3"]))  # 3 no longer holds it back
    cluster.cut = set()
    deadline = time.monotonic() + 5
    rejoin = []
    while not rejoin and time.monotonic() < deadline:
        rejoin = leader.isr_changes_due(EPOCHS)
        time.sleep(0.01)
    assert [sorted(change.isr) for _, _, change in rejoin] == [[1, 2, 3]]
    stale = {**EPOCHS, 3: 999}  # a newer registration of broker 3 than the one fetching
    leader.isr_change_done(TOPIC, None)  # the write failed: nothing changed
    assert leader.isr_changes_due(stale) == []


def _values(broker: Broker) -> list[tuple[int, bytes | None]]:
    data = read_all(broker.partition(TOPIC).log)
    return [(r.offset, r.value) for b in iter_batches(data) for r in b.records()]


def test_a_follower_behind_its_leaders_log_start_restarts_there_and_catches_up(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path / "small", replica_ack_timeout_ms=2000, log_segment_bytes=1024)
    try:
        cluster.roles(leader=1, epoch=1)
        cluster.start_pumping()
        leader = cluster.brokers[1]
        leader.produce(TOPIC.topic, 0, batch([b"before the cut"]))
        wait_until_equal = time.monotonic() + 5
        while cluster.log_bytes(3) != cluster.log_bytes(1) and time.monotonic() < wait_until_equal:
            time.sleep(0.01)
        cluster.cut = {3}
        cluster.roles(leader=1, epoch=2, isr=(1, 2), to=BROKER_IDS)  # 3 left the ISR
        for number in range(40):  # several segments while 3 is away
            leader.produce(TOPIC.topic, 0, batch([b"%03d" % number + b"x" * 200]))
        leader_end = cluster.partition(1).log.log_end_offset
        dropped = cluster.partition(1).log.delete_segments_before(leader_end)
        start = cluster.partition(1).log.log_start_offset
        assert dropped and start > cluster.partition(3).log.log_end_offset
        cluster.cut = set()
        deadline = time.monotonic() + 10
        while cluster.partition(3).log.log_end_offset < leader_end and time.monotonic() < deadline:
            time.sleep(0.01)
        follower = cluster.partition(3).log
        assert (follower.log_start_offset, follower.log_end_offset) == (start, leader_end)
        assert cluster.log_bytes(3) == cluster.log_bytes(1)  # byte-identical from the start
        assert follower.epochs.entries == cluster.partition(1).log.epochs.entries
    finally:
        cluster.close()


def test_a_followers_waiting_fetch_ends_when_its_leader_takes_a_new_partition(
    cluster: Cluster,
) -> None:
    """A follower's long poll names only the partitions it followed when it was sent; a
    leadership the leader takes meanwhile ends it, so the next fetch names the new
    partition at once (the new leader's promotion barrier, and every write behind it,
    no longer waits out the rest of the follower's max_wait_ms)."""
    cluster.use_coordinator(2)  # broker 2 leads __txn_journal-0, which 3 follows
    for _ in range(3):
        cluster.pump_once()  # 3 holds all of it: its next fetch has nothing to wait for
    request = cluster.brokers[3].replica_fetch_request(2, max_wait_ms=10_000)
    assert request is not None and TOPIC not in [p.topic_partition for p in request.partitions]
    answered: list[float] = []

    def fetch() -> None:
        started_s = time.monotonic()
        cluster.brokers[2].replica_fetch(request)
        answered.append(time.monotonic() - started_s)

    waiting = threading.Thread(target=fetch, daemon=True)
    waiting.start()
    time.sleep(0.3)
    assert not answered, "the fetch had nothing to wait for"
    cluster.roles(leader=2, epoch=1)  # broker 2 takes TOPIC, which 3 replicates
    waiting.join(8)
    assert answered and answered[0] < 9, answered  # not the whole 10 s
    follow_up = cluster.brokers[3].replica_fetch_request(2, max_wait_ms=0)
    assert follow_up is not None and TOPIC in [p.topic_partition for p in follow_up.partitions]


def test_an_isr_expansion_waits_for_an_advance_under_way(cluster: Cluster) -> None:
    """An advance computed from the old ISR must not land between the expansion's check
    (the follower holds the high watermarks) and its proposal (it counts from then on):
    the high watermarks would pass what the follower being added holds, and records
    acknowledged then would be lost if it were elected."""
    cluster.roles(leader=1, epoch=1, isr=(1, 2))
    cluster.pump_once()  # 3 has fetched: it holds what the leader holds
    partition = cluster.partition(1)
    in_advance, go_on = threading.Event(), threading.Event()
    replicated_end = partition.replicated_end

    def held_replicated_end() -> int:
        if threading.current_thread().name == "advance":
            in_advance.set()
            assert go_on.wait(10), "the test never let the advance go on"
        return replicated_end()

    partition.replicated_end = held_replicated_end  # type: ignore[method-assign]
    advance = threading.Thread(target=partition._advance_high_watermark, name="advance")
    changes: list[object] = []
    expansion = threading.Thread(
        target=lambda: changes.append(partition.isr_change_due(int(time.time() * 1000), EPOCHS))
    )
    advance.start()
    try:
        assert in_advance.wait(10), "the advance never started"
        expansion.start()
        expansion.join(0.5)
        assert expansion.is_alive(), "the expansion was checked while an advance was under way"
    finally:
        go_on.set()
        advance.join(10)
        expansion.join(10)
    assert [sorted(change.isr) for change in changes if change is not None] == [[1, 2, 3]]
