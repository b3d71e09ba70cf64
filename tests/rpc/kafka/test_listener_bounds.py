"""The listener's own bounds: connections, and a stop that ends waiting fetches promptly
(each test has a listener of its own, on a broker of its own)."""

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

from twinlog.engine.broker.broker import Broker
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


def test_stop_ends_a_waiting_fetch_and_closes_the_listener(broker: Broker) -> None:
    Admin(broker).create_topic("idle", partitions=1)
    listener = KafkaListener(broker, "127.0.0.1", 0)
    listener.start()
    connection = socket.create_connection(("127.0.0.1", listener.port), timeout=10)
    Topic = FetchRequest.FetchTopic
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=20_000,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=1,
        session_id=0,
        session_epoch=-1,
        topics=[
            Topic(
                topic="idle",
                partitions=[
                    Topic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
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
