"""What a client with write access to one topic can hold at the Kafka door: decompressed
bytes, within the decompression budget. Each test has a broker and a listener of its
own, with small limits so that it runs fast."""

from __future__ import annotations

import io
import logging
import re
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import kafka
import kafka.errors
import pytest
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.decompression_budget import DecompressionBudget
from twinlog.rpc.client import Admin
from twinlog.rpc.kafka.error_codes import CORRUPT_MESSAGE, NONE, REQUEST_TIMED_OUT
from twinlog.rpc.kafka.listener import KafkaListener
from twinlog.rpc.kafka.settings import MEBIBYTE, KafkaListenerSettings

CLIENT_TIMEOUT_S = 5


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


def test_gzip_bombs_take_their_bytes_from_the_decompression_budget(
    broker: Broker, listeners: list[KafkaListener], caplog: pytest.LogCaptureFixture
) -> None:
    """Many connections sending a small gzip batch that inflates to 16 MiB: never two
    inflated at once in a 24 MiB budget, and a retriable error, not memory, when it is
    spent."""
    Admin(broker).create_topic("bombed", partitions=1)
    budget = DecompressionBudget(24 * MEBIBYTE, wait_ms=300)
    listener = _start(listeners, broker, decompression_budget=budget)
    caplog.set_level(logging.INFO, logger="twinlog.kafka")
    bomb = _gzip_bomb(BOMB_BYTES)
    assert len(bomb) < 64 * 1024
    # The budget two thirds spent elsewhere (a produce on the gRPC door): no room for any.
    with budget.reserve(BOMB_BYTES):
        refused = _produce_at_once(listener, "bombed", bomb, 8)
    assert {answer.error_code for answer in refused} == {REQUEST_TIMED_OUT}
    assert kafka.errors.for_code(REQUEST_TIMED_OUT).retriable
    assert "decompressed_bytes_in_flight_max" in refused[0].error_message
    # What was short, in the log: the batch's bytes and the budget's.
    assert re.search(r"bombed-0 refused: a gzip batch .* needs \d+ bytes decompressed", caplog.text)
    assert budget.peak_reserved_bytes == BOMB_BYTES  # only the test's own reservation
    # With the budget free, the bombs go through one at a time (or wait, and are refused).
    answers = _produce_at_once(listener, "bombed", bomb, 8)
    codes = [answer.error_code for answer in answers]
    assert set(codes) <= {NONE, REQUEST_TIMED_OUT} and NONE in codes
    # Each reserved its section (a little over the value), never two at once.
    assert BOMB_BYTES < budget.peak_reserved_bytes <= budget.bytes_max < 2 * BOMB_BYTES
    assert budget.reserved_bytes == 0
    assert broker.list_offset("bombed", 0, "latest") == codes.count(NONE)


def test_a_batch_over_produce_decompressed_bytes_max_reserves_nothing(
    broker: Broker, listeners: list[KafkaListener]
) -> None:
    Admin(broker).create_topic("too-big", partitions=1)
    budget = DecompressionBudget(24 * MEBIBYTE)
    settings = KafkaListenerSettings(produce_decompressed_bytes_max=4 * MEBIBYTE)
    listener = _start(listeners, broker, settings=settings, decompression_budget=budget)
    answer = _produce(listener, "too-big", _gzip_bomb(8 * MEBIBYTE))
    assert answer.error_code == CORRUPT_MESSAGE
    assert "produce_decompressed_bytes_max" in answer.error_message
    assert budget.peak_reserved_bytes == 0  # counted, never held


class _SharingBroker:
    """A broker that shares its decompression budget (as the gRPC door's broker does)."""

    def __init__(self, broker: Broker, budget: DecompressionBudget) -> None:
        self._broker = broker
        self.decompression_budget = budget

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)


def test_the_listener_takes_the_budget_its_broker_shares(broker: Broker) -> None:
    budget = DecompressionBudget(8 * MEBIBYTE)
    sharing = cast(Broker, _SharingBroker(broker, budget))
    listener = KafkaListener(sharing, "127.0.0.1", 0)
    try:
        assert listener.context.decompression_budget is budget
        alone = KafkaListener(broker, "127.0.0.1", 0)  # a broker that shares none (yet)
        try:
            own = alone.context.decompression_budget
            assert own is not budget
            assert own.bytes_max == KafkaListenerSettings().decompressed_bytes_in_flight_max
        finally:
            alone.stop(grace_ms=0)
    finally:
        listener.stop(grace_ms=0)
