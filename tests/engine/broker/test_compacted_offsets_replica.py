"""A compacted, replicated ``__consumer_offsets`` partition and a follower that catches up
from the compacted leader log (three cluster brokers in one process): the follower copies
the cleaned batches, offset gaps and all, holds the same log as the leader, and, made the
group's coordinator, answers every group's latest commits."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cluster_support import wait_for as wait_for_slowly
from log_support import read_all
from replication_support import BROKER_IDS, EPOCHS, Cluster

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_reader import iter_batches

GROUP = "billing"
CONSUMED = [TopicPartition("payments", p) for p in range(4)]
ROUNDS = 60  # commits of each partition's offset: most of them superseded
SEGMENT_BYTES = 2048  # a few commits per segment: compaction has sealed ones to clean


def wait_for(what: str, probe: Callable[[], object]) -> None:
    wait_for_slowly(what, probe, timeout_s=15.0, poll_s=0.005)


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    opened = Cluster(
        tmp_path,
        replica_ack_timeout_ms=2000,
        replica_lag_time_max_ms=60_000,
        offsets_segment_bytes=SEGMENT_BYTES,
    )
    opened.roles(leader=1, epoch=1)
    opened.start_pumping()
    opened.use_coordinator(1)
    yield opened
    opened.close()


def _lead_offsets(cluster: Cluster, leader: int, epoch: int, isr: tuple[int, ...]) -> Broker:
    """``leader`` leads the group's offsets partition at ``epoch`` with ``isr``."""
    broker = cluster.brokers[leader]
    offsets_partition = broker.group_offsets.partition_for(GROUP)
    for each in cluster.brokers.values():
        each.take_partition_role(
            offsets_partition, leader, epoch, BROKER_IDS, {b: EPOCHS[b] for b in isr}
        )
    slots = broker.group_coordinators.slots
    assert slots is not None and slots.wait_active(offsets_partition.partition, timeout_s=10)
    return broker


def _offsets_log(cluster: Cluster, broker_id: int) -> bytes:
    broker = cluster.brokers[broker_id]
    return read_all(broker.partition(broker.group_offsets.partition_for(GROUP)).log)


def test_a_follower_catches_up_from_a_compacted_offsets_log_and_answers_the_latest(
    cluster: Cluster,
) -> None:
    cluster.cut = {3}  # away while the offsets are committed and compacted
    leader = _lead_offsets(cluster, 2, epoch=1, isr=(1, 2))
    for round_index in range(ROUNDS):
        leader.commit_offsets(GROUP, {tp: round_index * 10 + tp.partition for tp in CONSUMED})
    latest = {tp: (ROUNDS - 1) * 10 + tp.partition for tp in CONSUMED}
    partition = leader.partition(leader.group_offsets.partition_for(GROUP))
    report = partition.compact_log()
    assert report.records_dropped > 0, report
    offsets = [
        record.offset
        for batch in iter_batches(_offsets_log(cluster, 2))
        for record in batch.records()
    ]
    held = partition.log.log_end_offset - partition.log.log_start_offset
    assert len(offsets) < held  # gaps: compacted away
    assert _offsets_log(cluster, 3) == b""

    cluster.cut = set()  # broker 3 fetches from the compacted leader log, from nothing
    wait_for(
        "broker 3 to hold the leader's compacted offsets log",
        lambda: _offsets_log(cluster, 3) == _offsets_log(cluster, 2),
    )
    successor = _lead_offsets(cluster, 3, epoch=2, isr=BROKER_IDS)
    assert successor.fetch_offsets(GROUP, CONSUMED) == latest
    successor.commit_offsets(GROUP, {CONSUMED[0]: 9999})  # and it takes new commits
    assert successor.fetch_offsets(GROUP, [CONSUMED[0]]) == {CONSUMED[0]: 9999}
