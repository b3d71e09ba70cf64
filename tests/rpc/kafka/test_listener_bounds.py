"""The listener's own bounds and lifetime: connections, a stop that ends waiting fetches
promptly, a restart in the middle of a Kafka producer's transaction (each test has
listeners of its own, on a broker of its own)."""

from __future__ import annotations

import io
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import build_batch
from twinlog.rpc.client import Admin
from twinlog.rpc.kafka.listener import KafkaListener
from twinlog.rpc.kafka.settings import KafkaListenerSettings


@pytest.fixture()
def broker(tmp_path: Path) -> Iterator[Broker]:
    opened = Broker.open(tmp_path / "data")
    try:
        yield opened
    finally:
        opened.close()


def _call(connection: socket.socket, request: Any, response_class: Any, version: int) -> Any:
    request.with_header(correlation_id=1, client_id="bounds-test")
    connection.sendall(bytes(request.encode(version=version, header=True, framed=True)))
    (size,) = struct.unpack(">i", _read(connection, 4))
    return response_class.decode(io.BytesIO(_read(connection, size)), version=version, header=True)


def _read(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            return data
        data += chunk
    return data


def test_connections_over_the_limit_are_closed(broker: Broker) -> None:
    listener = KafkaListener(broker, "127.0.0.1", 0, KafkaListenerSettings(connections_max=2))
    listener.start()
    opened = [socket.create_connection(("127.0.0.1", listener.port), timeout=5) for _ in range(2)]
    try:
        for connection in opened:  # both served
            assert _call(connection, ApiVersionsRequest(), ApiVersionsResponse, 3).error_code == 0
        extra = socket.create_connection(("127.0.0.1", listener.port), timeout=5)
        opened.append(extra)
        assert _read(extra, 4) == b""  # closed by the listener, unanswered
        opened[0].close()
        deadline = time.monotonic() + 5
        while listener.connection_count() > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        again = socket.create_connection(("127.0.0.1", listener.port), timeout=5)
        opened.append(again)
        assert _call(again, ApiVersionsRequest(), ApiVersionsResponse, 3).error_code == 0
    finally:
        for connection in opened:
            connection.close()
        listener.stop(grace_ms=1_000)


def waiting_fetch(topic: str, partitions: int) -> Any:
    """A Fetch (v12) of the topic's partitions from offset 0 that may wait 20 s."""
    Topic = FetchRequest.FetchTopic
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=20_000,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=1,
        session_id=0,
        session_epoch=-1,
        topics=[
            Topic(
                topic=topic,
                partitions=[
                    Topic.FetchPartition(
                        partition=index, fetch_offset=0, partition_max_bytes=1 << 20
                    )
                    for index in range(partitions)
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def test_stop_ends_a_waiting_fetch_and_closes_the_listener(broker: Broker) -> None:
    Admin(broker).create_topic("idle", partitions=1)
    listener = KafkaListener(broker, "127.0.0.1", 0)
    listener.start()
    connection = socket.create_connection(("127.0.0.1", listener.port), timeout=10)
    request = waiting_fetch("idle", 1)
    answers: list[Any] = []
    waiting = threading.Thread(
        target=lambda: answers.append(_call(connection, request, FetchResponse, 12))
    )
    waiting.start()
    time.sleep(0.3)  # the fetch waits for records that never come
    started = time.monotonic()
    listener.stop(grace_ms=5_000)
    waiting.join(5)
    try:
        assert time.monotonic() - started < 2  # not the fetch's 20 s
        assert answers and answers[0].responses[0].partitions[0].error_code == 0
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", listener.port), timeout=2).close()
    finally:
        connection.close()


def test_a_fetch_of_many_partitions_wakes_on_any_of_them(broker: Broker) -> None:
    """The wait is on all the fetch's partitions at once (the broker's one purgatory): a
    record on the last of three answers the fetch at once, not after a slice on each of
    the others (a slice here is longer than the whole test)."""
    Admin(broker).create_topic("quiet", partitions=3)
    settings = KafkaListenerSettings(fetch_wait_slice_ms=15_000, fetch_wait_ms_max=20_000)
    listener = KafkaListener(broker, "127.0.0.1", 0, settings)
    listener.start()
    connection = socket.create_connection(("127.0.0.1", listener.port), timeout=30)
    request = waiting_fetch("quiet", 3)
    answers: list[Any] = []
    waiting = threading.Thread(
        target=lambda: answers.append(_call(connection, request, FetchResponse, 12))
    )
    try:
        waiting.start()
        time.sleep(0.3)  # the fetch waits
        started = time.monotonic()
        broker.produce("quiet", 2, build_batch([b"late"]))
        waiting.join(10)
        assert answers, "the fetch was not answered within 10 s"
        assert time.monotonic() - started < 5
        by_partition = {p.partition_index: p for p in answers[0].responses[0].partitions}
        assert by_partition[2].records and not by_partition[0].records
    finally:
        connection.close()
        listener.stop(grace_ms=1_000)


def test_a_transaction_begun_before_a_listener_restart_commits_after_it(broker: Broker) -> None:
    """The engine knows Kafka producers' open transactions, not the listener: a commit after
    a restart of the listener commits what was sent before it (never a silent NONE)."""
    Admin(broker).create_topic("moved", partitions=1)
    before = KafkaListener(broker, "127.0.0.1", 0)
    before.start()
    with socket.create_connection(("127.0.0.1", before.port), timeout=10) as connection:
        identity = _call(
            connection,
            InitProducerIdRequest(transactional_id="mover", transaction_timeout_ms=60_000),
            InitProducerIdResponse,
            4,
        )
        Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        added = _call(
            connection,
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id="mover",
                v3_and_below_producer_id=identity.producer_id,
                v3_and_below_producer_epoch=identity.producer_epoch,
                v3_and_below_topics=[Topic(name="moved", partitions=[0])],
            ),
            AddPartitionsToTxnResponse,
            3,
        )
        assert (
            added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        )
        batch = build_batch(
            [b"a", b"b"],
            "none",
            producer_id=identity.producer_id,
            producer_generation=identity.producer_epoch,
            base_sequence=0,
            transactional=True,
        )
        Data = ProduceRequest.TopicProduceData
        produced = _call(
            connection,
            ProduceRequest(
                transactional_id="mover",
                acks=-1,
                timeout_ms=5_000,
                topic_data=[
                    Data(
                        name="moved",
                        partition_data=[Data.PartitionProduceData(index=0, records=batch)],
                    )
                ],
            ),
            ProduceResponse,
            9,
        )
        assert produced.responses[0].partition_responses[0].error_code == 0
    before.stop(grace_ms=1_000)
    after = KafkaListener(broker, "127.0.0.1", 0)
    after.start()
    try:
        with socket.create_connection(("127.0.0.1", after.port), timeout=10) as connection:
            ended = _call(
                connection,
                EndTxnRequest(
                    transactional_id="mover",
                    producer_id=identity.producer_id,
                    producer_epoch=identity.producer_epoch,
                    committed=True,
                ),
                EndTxnResponse,
                3,
            )
        assert ended.error_code == 0
        deadline = time.monotonic() + 10
        while broker.list_offset("moved", 0, "latest") < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert broker.list_offset("moved", 0, "latest") == 2
    finally:
        after.stop(grace_ms=1_000)
