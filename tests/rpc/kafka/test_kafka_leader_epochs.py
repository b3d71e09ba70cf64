"""Leader epochs on the Kafka listener (KIP-320), by raw requests: Metadata, ListOffsets
and Fetch tell and check the partition's real epoch, and OffsetForLeaderEpoch answers
where each epoch ends, per partition. (Real consumers across a new epoch:
``test_leader_change_consumers``.)"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.client import Producer
from twinlog.rpc.kafka.error_codes import NONE, UNKNOWN_TOPIC_OR_PARTITION

FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
CLUSTER_AUTHORIZATION_FAILED = 31
TOPIC_AUTHORIZATION_FAILED = 29


def write(broker: Any, topic: str, values: list[bytes]) -> None:
    with Producer(broker) as producer:
        for value in values:
            producer.send(topic, value, partition=0)


def promote(broker: Any, topic: str, epoch: int) -> None:
    """A new leader epoch for partition 0, as a leader change gives one."""
    broker.partition(TopicPartition(topic, 0)).epochs.become_leader(epoch)


def _metadata_epoch(raw: Any, topic: str) -> int:
    Wanted = MetadataRequest.MetadataRequestTopic
    answer = raw.call(
        MetadataRequest(topics=[Wanted(name=topic)], allow_auto_topic_creation=False),
        MetadataResponse,
        12,
    )
    [found] = answer.topics[0].partitions
    assert found.error_code == NONE
    return int(found.leader_epoch)


def _offset_for_epoch(
    raw: Any,
    topic: str,
    leader_epoch: int,
    current: int = -1,
    replica_id: int = -1,
    version: int = 4,
) -> list[tuple[int, int, int, int]]:
    Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    Partition = Topic.OffsetForLeaderPartition
    request = OffsetForLeaderEpochRequest(
        replica_id=replica_id,
        topics=[
            Topic(
                topic=topic,
                partitions=[
                    Partition(partition=n, current_leader_epoch=current, leader_epoch=leader_epoch)
                    for n in (0, 7)
                ],
            )
        ],
    )
    answer = raw.call(request, OffsetForLeaderEpochResponse, version)
    return [
        (item.partition, item.error_code, item.leader_epoch, item.end_offset)
        for item in answer.topics[0].partitions
    ]


def test_epochs_are_told_checked_and_answered_per_partition(raw: Any, kafka_server: Any) -> None:
    broker = kafka_server.broker
    topic = kafka_server.topic()
    write(broker, topic, [b"a", b"b", b"c"])
    assert _metadata_epoch(raw, topic) == 0
    promote(broker, topic, 2)
    write(broker, topic, [b"d", b"e"])
    assert _metadata_epoch(raw, topic) == 2

    # OffsetForLeaderEpoch: where each epoch ends (epoch 1 was never held: epoch 0's end)
    assert _offset_for_epoch(raw, topic, 0) == [
        (0, NONE, 0, 3),
        (7, UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
    ]
    assert _offset_for_epoch(raw, topic, 1, current=2)[0] == (0, NONE, 0, 3)
    assert _offset_for_epoch(raw, topic, 2, current=2)[0] == (0, NONE, 2, 5)
    assert _offset_for_epoch(raw, topic, 2, version=0)[0][1:] == (NONE, -1, 5)
    assert _offset_for_epoch(raw, topic, 2, current=1)[0][1] == FENCED_LEADER_EPOCH
    assert _offset_for_epoch(raw, topic, 2, current=3)[0][1] == UNKNOWN_LEADER_EPOCH
    refused = _offset_for_epoch(raw, topic, 2, replica_id=1)
    assert {item[1] for item in refused} == {CLUSTER_AUTHORIZATION_FAILED}

    # Fetch v9+ checks current_leader_epoch (-1 is not checked)
    def fetch(current: int, offset: int = 0, last_fetched_epoch: int = -1) -> Any:
        Topic = FetchRequest.FetchTopic
        part = Topic.FetchPartition(
            partition=0,
            current_leader_epoch=current,
            fetch_offset=offset,
            last_fetched_epoch=last_fetched_epoch,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
        )
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=1,
            session_id=0,
            session_epoch=-1,
            topics=[Topic(topic=topic, partitions=[part])],
            forgotten_topics_data=[],
            rack_id="",
        )
        [answer] = raw.call(request, FetchResponse, 12).responses[0].partitions
        return answer

    assert fetch(1).error_code == FENCED_LEADER_EPOCH and not fetch(1).records
    assert fetch(3).error_code == UNKNOWN_LEADER_EPOCH
    assert fetch(2).error_code == NONE and fetch(2).records
    assert fetch(-1).error_code == NONE
    # v12+: a last fetched epoch the log never had at that offset is answered where the
    # log's epoch below it ends (epoch 1 was never held: epoch 0 ends at 3), no records
    diverged = fetch(2, offset=5, last_fetched_epoch=1)
    assert diverged.error_code == NONE and not diverged.records
    assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (0, 3)
    assert diverged.high_watermark == 5
    for offset, epoch in ((3, 0), (5, 2), (4, 2)):  # a prefix of the log: records or none
        same = fetch(2, offset=offset, last_fetched_epoch=epoch)
        assert same.error_code == NONE, (offset, epoch)
        assert same.diverging_epoch is None, (offset, epoch)  # a tagged field, left out
    assert fetch(2, offset=3, last_fetched_epoch=0).records

    # ListOffsets v4+: checked too, and the epoch of what it finds
    def list_offset(timestamp: int, current: int) -> tuple[int, int, int]:
        Topic = ListOffsetsRequest.ListOffsetsTopic
        part = Topic.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=current, timestamp=timestamp
        )
        request = ListOffsetsRequest(
            replica_id=-1, isolation_level=1, topics=[Topic(name=topic, partitions=[part])]
        )
        [answer] = raw.call(request, ListOffsetsResponse, 8).topics[0].partitions
        return answer.error_code, answer.offset, answer.leader_epoch

    assert list_offset(-1, 2) == (NONE, 5, 2)
    assert list_offset(-2, -1) == (NONE, 0, 0)
    assert list_offset(-1, 1)[0] == FENCED_LEADER_EPOCH
    assert list_offset(-1, 3)[0] == UNKNOWN_LEADER_EPOCH


def test_a_topic_not_seen_is_refused(guarded_raw: Any, guarded_server: Any) -> None:
    topic = guarded_server.topic(prefix="hidden")
    [answer] = _offset_for_epoch(guarded_raw, topic, 0)[:1]
    assert answer[1] == TOPIC_AUTHORIZATION_FAILED
    readable = guarded_server.topic(prefix="readable")
    assert _offset_for_epoch(guarded_raw, readable, 0)[0] == (0, NONE, 0, 0)
