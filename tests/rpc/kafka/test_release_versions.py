"""The listener answers as one Kafka release: ApiVersions lists that release's ranges for
every API served, and the old versions (which clients pinned to older releases send) are
answered, not refused."""

from __future__ import annotations

import time
import uuid
from typing import Any

from kafka.protocol.admin import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

from twinlog.rpc.kafka.dispatch import API_BY_KEY
from twinlog.rpc.kafka.error_codes import (
    NONE,
    UNKNOWN_TOPIC_ID,
    UNSUPPORTED_VERSION,
)
from twinlog.rpc.kafka.versions import AHEAD_OF_RELEASE, KAFKA_RELEASE

# Kafka 3.8.0's validVersions of every client-facing request
# (clients/src/main/resources/common/message/*Request.json at tag 3.8.0; listeners
# zkBroker/broker), by API key. Inter-broker and KRaft-only keys are left out.
KAFKA_3_8_0: dict[int, tuple[int, int]] = {
    0: (0, 11), 1: (0, 16), 2: (0, 8), 3: (0, 12), 8: (0, 9), 9: (0, 9), 10: (0, 5),
    11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 17: (0, 1),
    18: (0, 3), 19: (0, 7), 20: (0, 6), 21: (0, 2), 22: (0, 5), 23: (0, 4), 24: (0, 5),
    25: (0, 4), 26: (0, 4), 27: (0, 1), 28: (0, 4), 29: (0, 3), 30: (0, 3), 31: (0, 3),
    32: (0, 4), 33: (0, 2), 34: (0, 2), 35: (0, 4), 36: (0, 2), 37: (0, 3), 38: (0, 3),
    39: (0, 2), 40: (0, 2), 41: (0, 3), 42: (0, 2), 43: (0, 2), 44: (0, 1), 45: (0, 0),
    46: (0, 0), 47: (0, 0), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0), 57: (0, 1),
    60: (0, 1), 61: (0, 0), 65: (0, 0), 66: (0, 1), 68: (0, 0), 69: (0, 0), 71: (0, 0),
    72: (0, 0), 74: (0, 0), 75: (0, 0),
}  # fmt: skip


def test_api_versions_lists_the_release_ranges(raw: Any) -> None:
    assert KAFKA_RELEASE == "3.8.0"
    for version in (0, 3):
        answer = raw.call(ApiVersionsRequest(), ApiVersionsResponse, version)
        assert answer.error_code == NONE
        listed = {
            entry.api_key: (entry.min_version, entry.max_version) for entry in answer.api_keys
        }
        assert set(listed) == set(API_BY_KEY)
        # the release's ranges, but for the versions served ahead of it (each argued there)
        assert listed == {key: AHEAD_OF_RELEASE.get(key, KAFKA_3_8_0[key]) for key in listed}
        for key, (low, high) in AHEAD_OF_RELEASE.items():
            assert low == KAFKA_3_8_0[key][0] and high > KAFKA_3_8_0[key][1]


def test_old_versions_of_metadata_list_offsets_and_topics(raw: Any, kafka_server: Any) -> None:
    topic = kafka_server.topic()
    answer = raw.call(
        MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]),
        MetadataResponse,
        1,
    )
    assert [(t.name, t.error_code) for t in answer.topics] == [(topic, NONE)]

    Topic = ListOffsetsRequest.ListOffsetsTopic
    for version in (0, 1):
        partition = Topic.ListOffsetsPartition(partition_index=0, timestamp=-1, max_num_offsets=1)
        request = ListOffsetsRequest(
            replica_id=-1, topics=[Topic(name=topic, partitions=[partition])]
        )
        answer = raw.call(request, ListOffsetsResponse, version)
        found = answer.topics[0].partitions[0]
        assert found.error_code == NONE
        assert (found.old_style_offsets if version == 0 else found.offset) in ([0], 0)

    for version in (0, 1, 2):
        name = f"{topic}-created-v{version}"
        creatable = CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[]
        )
        created = raw.call(
            CreateTopicsRequest(topics=[creatable], timeout_ms=5000), CreateTopicsResponse, version
        )
        assert [(t.name, t.error_code) for t in created.topics] == [(name, NONE)]
    for version in range(0, 7):
        name = f"{topic}-deleted-v{version}"
        kafka_server.broker.create_topic(name, 1)
        if version < 6:
            request = DeleteTopicsRequest(topic_names=[name], timeout_ms=5000)
        else:
            state = DeleteTopicsRequest.DeleteTopicState(name=name, topic_id=uuid.UUID(int=0))
            request = DeleteTopicsRequest(topics=[state], timeout_ms=5000)
        deleted = raw.call(request, DeleteTopicsResponse, version)
        assert [(r.name, r.error_code) for r in deleted.responses] == [(name, NONE)], version
    assert raw.call(DescribeLogDirsRequest(topics=None), DescribeLogDirsResponse, 0).results


def test_old_offset_commit_and_fetch_versions(raw: Any, kafka_server: Any) -> None:
    topic = kafka_server.topic()
    for version, offset in ((0, 3), (1, 4), (2, 5)):
        Topic = OffsetCommitRequest.OffsetCommitRequestTopic
        partition = Topic.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, commit_timestamp=-1, committed_metadata=""
        )
        request = OffsetCommitRequest(
            group_id=f"old-{topic}", generation_id_or_member_epoch=-1, member_id="",
            retention_time_ms=-1, topics=[Topic(name=topic, partitions=[partition])],
        )  # fmt: skip
        committed = raw.call(request, OffsetCommitResponse, version)
        assert committed.topics[0].partitions[0].error_code == NONE, version
        for fetch_version in (0, 1):
            wanted = OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])
            request = OffsetFetchRequest(group_id=f"old-{topic}", topics=[wanted])
            fetched = raw.call(request, OffsetFetchResponse, fetch_version)
            assert fetched.topics[0].partitions[0].committed_offset == offset


def _batch(value: bytes) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(builder.build())


def _fetch(topic: str, topic_id: uuid.UUID, version: int) -> FetchRequest:
    Topic = FetchRequest.FetchTopic
    partition = Topic.FetchPartition(
        partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=1 << 20,
    )  # fmt: skip
    return FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, topics=[Topic(topic=topic, topic_id=topic_id, partitions=[partition])],
        forgotten_topics_data=[], rack_id="",
    )  # fmt: skip


def test_fetch_by_topic_id_from_version_13(raw: Any, kafka_server: Any) -> None:
    topic = kafka_server.topic()
    kafka_server.broker.produce(topic, 0, _batch(b"by id"))
    metadata = raw.call(
        MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]),
        MetadataResponse,
        12,
    )
    topic_id = metadata.topics[0].topic_id
    for version in (12, 13, 14, 15, 16):
        answer = raw.call(_fetch(topic, topic_id, version), FetchResponse, version)
        assert answer.error_code == NONE
        (read,) = answer.responses
        assert (read.topic if version < 13 else read.topic_id) == (
            topic if version < 13 else topic_id
        )
        assert read.partitions[0].error_code == NONE
        assert b"by id" in bytes(read.partitions[0].records)
    unknown = raw.call(_fetch("", uuid.uuid4(), 13), FetchResponse, 13)
    assert unknown.responses[0].partitions[0].error_code == UNKNOWN_TOPIC_ID


def test_transaction_versions_of_kip_890_are_answered(raw: Any) -> None:
    # v4 of EndTxn only allows TRANSACTION_ABORTABLE in the answer: answered as v3 is
    request = EndTxnRequest(
        transactional_id="nobody", producer_id=999, producer_epoch=0, committed=True
    )
    assert raw.call(request, EndTxnResponse, 4).error_code != NONE
    # AddPartitionsToTxn v4+ is Kafka's broker-to-broker batch: refused as Kafka refuses a client
    batch = AddPartitionsToTxnRequest(transactions=[])
    answer = raw.call(batch, AddPartitionsToTxnResponse, 4)
    assert answer.error_code == 31  # CLUSTER_AUTHORIZATION_FAILED


def test_message_format_versions_are_refused_per_partition(raw: Any, kafka_server: Any) -> None:
    topic = kafka_server.topic()
    Data = ProduceRequest.TopicProduceData
    partition = Data.PartitionProduceData(index=0, records=b"")
    request = ProduceRequest(
        acks=1, timeout_ms=1000, topic_data=[Data(name=topic, partition_data=[partition])]
    )
    answer = raw.call(request, ProduceResponse, 2)
    assert answer.responses[0].partition_responses[0].error_code == UNSUPPORTED_VERSION
    answer = raw.call(_fetch(topic, uuid.UUID(int=0), 3), FetchResponse, 3)
    assert answer.responses[0].partitions[0].error_code == UNSUPPORTED_VERSION
