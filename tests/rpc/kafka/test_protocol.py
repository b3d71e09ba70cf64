"""The listener's answers to what well-behaved clients never send, and its bounds: unknown
versions (KIP-511), APIs not served, oversized frames, Fetch sizes and long polls."""

from __future__ import annotations

import struct
import threading
import time
from typing import Any

from kafka.protocol.admin import (
    AlterReplicaLogDirsRequest,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
)
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)

from twinlog.rpc.client import Producer
from twinlog.rpc.kafka.dispatch import API_BY_KEY
from twinlog.rpc.kafka.error_codes import FETCH_SESSION_ID_NOT_FOUND, UNSUPPORTED_VERSION


def test_api_versions_lists_every_served_api(raw: Any) -> None:
    answer = raw.call(ApiVersionsRequest(), ApiVersionsResponse, 3)
    assert answer.error_code == 0
    listed = {entry.api_key: (entry.min_version, entry.max_version) for entry in answer.api_keys}
    assert set(listed) == set(API_BY_KEY)
    assert listed[FetchRequest.API_KEY] == (0, 16)  # Kafka 3.8's (test_release_versions)


def test_api_versions_in_an_unknown_version_is_answered_in_v0(raw: Any) -> None:
    # A version no codec knows: the header is the v1 request header, the body anything.
    header = RequestHeader(
        request_api_key=ApiVersionsRequest.API_KEY,
        request_api_version=99,
        correlation_id=41,
        client_id="future-client",
    )
    body = bytes(header.encode(flexible=False)) + b"\x00future"
    raw.send_bytes(struct.pack(">i", len(body)) + body)
    frame = raw.read_frame()
    answer = ApiVersionsResponse.decode(frame, version=0, header=True)
    assert answer.header.correlation_id == 41
    assert answer.error_code == UNSUPPORTED_VERSION
    assert {entry.api_key for entry in answer.api_keys} == set(API_BY_KEY)


def test_an_api_not_served_is_answered_unsupported_version(raw: Any) -> None:
    request = DescribeQuorumRequest(topics=[])  # KRaft's: never served here
    answer = raw.call(request, DescribeQuorumResponse, 0)
    assert answer.error_code == UNSUPPORTED_VERSION
    # and the connection still serves
    assert raw.call(MetadataRequest(topics=[]), MetadataResponse, 12).brokers[0].node_id == 0


def test_an_api_without_a_top_level_error_code_closes_the_connection(raw: Any) -> None:
    request = AlterReplicaLogDirsRequest(dirs=[])  # not served
    request.with_header(correlation_id=1, client_id="raw-test")
    raw.send_bytes(bytes(request.encode(version=1, header=True, framed=True)))
    assert raw.read_frame() == b""


def test_an_oversized_frame_closes_the_connection_unread(raw: Any, kafka_server: Any) -> None:
    limit = kafka_server.listener.settings.frame_bytes_max
    raw.send_bytes(struct.pack(">i", limit + 1))
    assert raw.read_frame() == b""


def test_an_incremental_fetch_session_is_refused_for_a_full_fetch(raw: Any) -> None:
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=1,
        session_id=7,
        session_epoch=3,
        topics=[],
        forgotten_topics_data=[],
        rack_id="",
    )
    answer = raw.call(request, FetchResponse, 12)
    assert answer.error_code == FETCH_SESSION_ID_NOT_FOUND
    assert answer.session_id == 0


def _fetch(
    topic: str,
    offset: int,
    partition_max_bytes: int,
    max_wait_ms: int = 0,
    max_bytes: int = 1 << 20,
) -> FetchRequest:
    Topic = FetchRequest.FetchTopic
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            Topic(
                topic=topic,
                partitions=[
                    Topic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=partition_max_bytes,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def test_fetch_gives_one_whole_batch_under_a_tiny_limit(raw: Any, kafka_server: Any) -> None:
    topic = kafka_server.topic()
    with Producer(kafka_server.broker, compression="none") as producer:
        for _ in range(3):
            producer.send(topic, b"x" * 1000, partition=0)
            producer.flush()  # three batches
    answer = raw.call(_fetch(topic, 0, partition_max_bytes=10), FetchResponse, 12)
    partition = answer.responses[0].partitions[0]
    assert partition.error_code == 0 and partition.high_watermark == 3
    records = bytes(partition.records)
    (batch_length,) = struct.unpack_from(">i", records, 8)
    assert len(records) == 12 + batch_length  # exactly one whole batch
    everything = raw.call(_fetch(topic, 0, partition_max_bytes=1 << 20), FetchResponse, 12)
    assert len(bytes(everything.responses[0].partitions[0].records)) == 3 * len(records)
    capped = raw.call(_fetch(topic, 0, 1 << 20, max_bytes=len(records) + 1), FetchResponse, 12)
    assert len(bytes(capped.responses[0].partitions[0].records)) == len(records)


def test_a_waiting_fetch_blocks_only_its_own_connection(
    kafka_server: Any, raw: Any, connect: Any
) -> None:
    topic = kafka_server.topic()
    answers: list[Any] = []
    waiting = threading.Thread(
        target=lambda: answers.append(
            raw.call(_fetch(topic, 0, 1 << 20, max_wait_ms=1_500), FetchResponse, 12)
        )
    )
    started = time.monotonic()
    waiting.start()
    time.sleep(0.2)
    connect().call(ApiVersionsRequest(), ApiVersionsResponse, 3)
    assert time.monotonic() - started < 1.2  # answered while the fetch still waits
    with Producer(kafka_server.broker) as producer:
        producer.send(topic, b"wakes it", partition=0)
    waiting.join(10)
    assert answers and bytes(answers[0].responses[0].partitions[0].records)
    assert time.monotonic() - started < 1.5 + 1.0
