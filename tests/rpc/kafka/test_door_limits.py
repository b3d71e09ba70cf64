"""What a client without credentials, or with write access to one topic, can hold at the
Kafka door: connection slots (per address, and only seconds before its first request
or its SASL authentication) and decompressed bytes (the broker's decompression budget). Each
test has a broker and a listener of its own, with small limits so that it runs fast."""

from __future__ import annotations

import io
import logging
import re
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kafka
import kafka.errors
import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from twinlog.engine.base.units import MEBIBYTE
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import build_batch
from twinlog.rpc.client import Admin
from twinlog.rpc.kafka.error_codes import NONE, REQUEST_TIMED_OUT
from twinlog.rpc.kafka.listener import KafkaListener
from twinlog.rpc.kafka.settings import KafkaListenerSettings
from twinlog.rpc.policy.auth import Guard, TokenTable
from twinlog.rpc.wire.error_table import KafkaCode

CLIENT_TIMEOUT_S = 5
# An address of this host other than the clients' 127.0.0.1 (Linux routes 127/8 to lo).
OTHER_LOOPBACK = "127.0.0.2"
TOKEN = "door-token"
RECORD_LIST_TOO_LARGE = int(KafkaCode.RECORD_LIST_TOO_LARGE)  # the table's BatchTooLargeError


@pytest.fixture()
def broker(tmp_path: Path) -> Iterator[Broker]:
    opened = Broker.open(tmp_path / "data")
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture()
def listeners() -> Iterator[list[KafkaListener]]:
    """Listeners started by the test; each is stopped after it."""
    started: list[KafkaListener] = []
    try:
        yield started
    finally:
        for listener in started:
            listener.stop(grace_ms=1_000)


def _start(listeners: list[KafkaListener], broker: Broker, **arguments: Any) -> KafkaListener:
    listener = KafkaListener(broker, "127.0.0.1", 0, **arguments)
    listener.start()
    listeners.append(listener)
    return listener


def _connect(listener: KafkaListener, source: str = "127.0.0.1") -> socket.socket:
    connection = socket.create_connection(
        ("127.0.0.1", listener.port), timeout=CLIENT_TIMEOUT_S, source_address=(source, 0)
    )
    return connection


def _read(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            return data
        data += chunk
    return data


def _call(connection: socket.socket, request: Any, response_class: Any, version: int) -> Any:
    request.with_header(correlation_id=1, client_id="door-test")
    connection.sendall(bytes(request.encode(version=version, header=True, framed=True)))
    prefix = _read(connection, 4)
    assert len(prefix) == 4, "the listener closed the connection"
    (size,) = struct.unpack(">i", prefix)
    return response_class.decode(io.BytesIO(_read(connection, size)), version=version, header=True)


def _seconds_until_closed(connection: socket.socket) -> float:
    """How long until the listener closes ``connection`` (which sends nothing more);
    fails after CLIENT_TIMEOUT_S."""
    started = time.monotonic()
    try:
        assert connection.recv(1) == b"", "the listener sent bytes nobody asked for"
    except TimeoutError:
        pytest.fail(f"the connection was still open after {CLIENT_TIMEOUT_S} s")
    return time.monotonic() - started


def _wait_for_connections(listener: KafkaListener, count: int) -> None:
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while listener.connection_count() != count:
        assert time.monotonic() < deadline, f"{listener.connection_count()} connections open"
        time.sleep(0.01)


# --- connection slots ------------------------------------------------------------------


def test_idle_connections_from_one_address_leave_room_for_real_clients(
    broker: Broker, listeners: list[KafkaListener], caplog: pytest.LogCaptureFixture
) -> None:
    try:
        socket.create_connection(("127.0.0.1", 1), timeout=1, source_address=(OTHER_LOOPBACK, 0))
    except ConnectionRefusedError:
        pass  # the address exists; nothing listens on port 1
    except OSError as error:
        pytest.skip(f"{OTHER_LOOPBACK} is not a local address here: {error}")
    Admin(broker).create_topic("crowded", partitions=1)
    settings = KafkaListenerSettings(
        connections_max=10, connections_per_address_max=3, first_request_ms=60_000
    )
    listener = _start(listeners, broker, settings=settings)
    caplog.set_level(logging.WARNING, logger="twinlog.kafka")
    idle = [_connect(listener, OTHER_LOOPBACK) for _ in range(12)]  # more than every slot
    try:
        _wait_for_connections(listener, 3)
        closed = 0
        for connection in idle:
            connection.settimeout(0.5)
            try:
                closed += connection.recv(1) == b""
            except TimeoutError:
                pass  # one of the three held open
        assert closed == 9
        assert "connections_per_address_max" in caplog.text and OTHER_LOOPBACK in caplog.text
        bootstrap = f"127.0.0.1:{listener.port}"
        producer = kafka.KafkaProducer(
            bootstrap_servers=bootstrap, request_timeout_ms=5_000, max_block_ms=5_000
        )
        try:
            producer.send("crowded", b"through", partition=0).get(timeout=CLIENT_TIMEOUT_S)
        finally:
            producer.close(timeout=5)
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=bootstrap, consumer_timeout_ms=1_500, request_timeout_ms=5_000
        )
        try:
            consumer.assign([kafka.TopicPartition("crowded", 0)])
            consumer.seek_to_beginning()
            assert [record.value for record in consumer] == [b"through"]
        finally:
            consumer.close()
    finally:
        for connection in idle:
            connection.close()


def test_a_connection_that_sends_nothing_is_closed_after_first_request_ms(
    broker: Broker, listeners: list[KafkaListener], caplog: pytest.LogCaptureFixture
) -> None:
    listener = _start(listeners, broker, settings=KafkaListenerSettings(first_request_ms=300))
    caplog.set_level(logging.WARNING, logger="twinlog.kafka")
    silent = _connect(listener)
    trickling = _connect(listener)
    talking = _connect(listener)
    try:
        trickling.sendall(b"\x00\x00")  # half a size prefix: bytes, but never a request
        assert _call(talking, ApiVersionsRequest(), ApiVersionsResponse, 3).error_code == 0
        assert 0.2 < _seconds_until_closed(silent) < 3
        assert _seconds_until_closed(trickling) < 3
        peer = f"127.0.0.1:{silent.getsockname()[1]}"
        assert f"{peer} closed: no request within 300 ms (first_request_ms)" in caplog.text
        # Once it has asked something, a connection may be quiet (connection_idle_ms).
        time.sleep(0.4)
        assert _call(talking, ApiVersionsRequest(), ApiVersionsResponse, 3).error_code == 0
    finally:
        for connection in (silent, trickling, talking):
            connection.close()


def test_a_connection_that_does_not_finish_sasl_is_closed_after_authentication_ms(
    broker: Broker, listeners: list[KafkaListener], caplog: pytest.LogCaptureFixture
) -> None:
    guard = Guard(TokenTable([(TOKEN, "alice")]), None, mutual_tls=False)
    settings = KafkaListenerSettings(first_request_ms=5_000, authentication_ms=600)
    listener = _start(listeners, broker, settings=settings, guard=guard)
    caplog.set_level(logging.WARNING, logger="twinlog.kafka")
    stalling = _connect(listener)
    authenticated = None
    try:
        started = time.monotonic()
        handshake = SaslHandshakeRequest(mechanism="PLAIN")
        assert _call(stalling, handshake, SaslHandshakeResponse, 1).error_code == NONE
        # Busy with ApiVersions, never authenticating: the deadline holds all the same.
        with pytest.raises(AssertionError, match="closed the connection"):
            while time.monotonic() - started < CLIENT_TIMEOUT_S:
                _call(stalling, ApiVersionsRequest(), ApiVersionsResponse, 3)
                time.sleep(0.1)
        assert 0.5 < time.monotonic() - started < 3
        assert "SASL authentication not done within 600 ms (authentication_ms)" in caplog.text
        # One that authenticates in time stays, past the deadline.
        authenticated = _connect(listener)
        assert _call(authenticated, handshake, SaslHandshakeResponse, 1).error_code == NONE
        plain = SaslAuthenticateRequest(auth_bytes=f"\x00alice\x00{TOKEN}".encode())
        assert _call(authenticated, plain, SaslAuthenticateResponse, 1).error_code == NONE
        time.sleep(0.8)
        assert _call(authenticated, ApiVersionsRequest(), ApiVersionsResponse, 3).error_code == 0
    finally:
        stalling.close()
        if authenticated is not None:
            authenticated.close()


# --- decompressed bytes --------------------------------------------------------------------


def _gzip_bomb(value_bytes: int) -> bytes:
    """One record of ``value_bytes`` zeros, gzip: a few KiB that inflate to the value."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=DefaultRecordBatch.CODEC_GZIP,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    assert builder.append(0, timestamp=None, key=None, value=bytes(value_bytes), headers=[])
    return bytes(builder.build())


def _produce(listener: KafkaListener, topic: str, batch: bytes) -> Any:
    Data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=5_000,
        topic_data=[
            Data(name=topic, partition_data=[Data.PartitionProduceData(index=0, records=batch)])
        ],
    )
    with _connect(listener) as connection:
        return _call(connection, request, ProduceResponse, 9).responses[0].partition_responses[0]


def _produce_at_once(listener: KafkaListener, topic: str, batch: bytes, count: int) -> list[Any]:
    """``count`` connections sending ``batch`` together; their answers."""
    answers: list[Any] = []
    together = threading.Barrier(count)

    def send() -> None:
        together.wait(CLIENT_TIMEOUT_S)
        answers.append(_produce(listener, topic, batch))

    threads = [threading.Thread(target=send) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(3 * CLIENT_TIMEOUT_S)
    assert len(answers) == count, "a produce went unanswered"
    return answers


BOMB_BYTES = 16 * MEBIBYTE


def test_gzip_bombs_take_their_bytes_from_the_brokers_decompression_budget(
    tmp_path: Path, listeners: list[KafkaListener], caplog: pytest.LogCaptureFixture
) -> None:
    """Many connections sending a small gzip batch that inflates to 16 MiB: never two
    inflated at once in the broker's 24 MiB budget (the one both doors share), and a
    retriable error, not memory, when it is spent."""
    with Broker.open(
        tmp_path / "bombed",
        batch_decompressed_bytes_max=20 * MEBIBYTE,
        decompressed_bytes_in_flight_max=24 * MEBIBYTE,
    ) as broker:
        Admin(broker).create_topic("bombed", partitions=1)
        budget = broker.decompression_budget
        budget.wait_ms = 300
        listener = _start(listeners, broker)
        caplog.set_level(logging.INFO, logger="twinlog.kafka")
        bomb = _gzip_bomb(BOMB_BYTES)
        assert len(bomb) < 64 * 1024
        # The budget two thirds spent elsewhere (a produce on the gRPC door): no room for any.
        with budget.reserve(BOMB_BYTES):
            refused = _produce_at_once(listener, "bombed", bomb, 8)
        assert {answer.error_code for answer in refused} == {REQUEST_TIMED_OUT}
        assert kafka.errors.for_code(REQUEST_TIMED_OUT).retriable
        assert "decompressed_bytes_in_flight_max" in refused[0].error_message
        # What was short, in the log: the budget's bytes and the batch's.
        assert re.search(
            r"bombed-0 refused: \d+ bytes of batches are being decompressed.* no room for "
            r"\d+ more; retry shortly",
            caplog.text,
        )
        assert budget.peak_reserved_bytes == BOMB_BYTES  # only the test's own reservation
        # With the budget free, the bombs go through one at a time (or wait, and are refused).
        answers = _produce_at_once(listener, "bombed", bomb, 8)
        codes = [answer.error_code for answer in answers]
        assert set(codes) <= {NONE, REQUEST_TIMED_OUT} and NONE in codes
        # Each reserved its section (a little over the value), never two at once.
        assert BOMB_BYTES < budget.peak_reserved_bytes <= budget.bytes_max < 2 * BOMB_BYTES
        assert budget.reserved_bytes == 0
        assert broker.list_offset("bombed", 0, "latest") == codes.count(NONE)
        listener.stop(grace_ms=1_000)
        listeners.remove(listener)


def test_a_batch_is_held_to_its_topics_limit_by_the_broker(
    tmp_path: Path, listeners: list[KafkaListener]
) -> None:
    """The listener keeps no batch limit of its own: the broker holds a batch to its topic's
    max.message.bytes (else the broker's batch_bytes_max), as it does for the gRPC door."""
    with Broker.open(tmp_path / "own", batch_bytes_max=16 * 1024) as broker:
        broker.create_topic("default")
        broker.create_topic("large", config={"max.message.bytes": str(64 * 1024)})
        listener = _start(listeners, broker)
        batch = build_batch([bytes(20 * 1024)], "none")
        refused = _produce(listener, "default", batch)
        assert refused.error_code == RECORD_LIST_TOO_LARGE
        assert f"a batch of {len(batch)} bytes for default-0" in refused.error_message
        assert "over its topic's limit of 16384 bytes" in refused.error_message
        assert "max.message.bytes" in refused.error_message
        assert broker.list_offset("default", 0, "latest") == 0
        assert _produce(listener, "large", batch).error_code == NONE
        assert broker.list_offset("large", 0, "latest") == 1
        listener.stop(grace_ms=1_000)
        listeners.remove(listener)
