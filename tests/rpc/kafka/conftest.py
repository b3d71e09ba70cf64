"""Tests of ``twinlog.rpc.kafka``: real Kafka clients (kafka-python, confluent-kafka) against
a Kafka listener on 127.0.0.1 in front of an embedded broker in a temporary directory.

One broker and listener for the module; each test uses its own topics. Every client has
timeouts, so no test waits for ever.
"""

from __future__ import annotations

import io
import itertools
import socket
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client import Admin
from twinlog.rpc.kafka.listener import KafkaListener
from twinlog.rpc.kafka.settings import KafkaListenerSettings
from twinlog.rpc.policy.auth import Acl, Guard

CLIENT_TIMEOUT_MS = 10_000
_names = itertools.count()


@dataclass
class KafkaServer:
    broker: Broker
    listener: KafkaListener

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.listener.port}"

    def topic(self, partitions: int = 1, prefix: str = "topic") -> str:
        """A new topic, named after nothing else in the module (``prefix`` first, for
        an ACL's pattern)."""
        name = f"{prefix}-{next(_names)}"
        Admin(self.broker).create_topic(name, partitions=partitions)
        return name


@pytest.fixture(scope="module")
def kafka_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaServer]:
    broker = Broker.open(tmp_path_factory.mktemp("kafka") / "data")
    settings = KafkaListenerSettings(frame_bytes_max=4 << 20, fetch_wait_slice_ms=50)
    listener = KafkaListener(broker, "127.0.0.1", 0, settings)
    listener.start()
    try:
        yield KafkaServer(broker, listener)
    finally:
        listener.stop(grace_ms=2_000)
        broker.close()


# What the anonymous principal may do on ``guarded_server``: read the topics named
# readable*, see the transactional ids named seen* (DESCRIBE) and writer* (WRITE implies it).
GUARDED_ACL = """
anonymous  read      readable*
anonymous  describe  transactional-id:seen*
anonymous  write     transactional-id:writer*
"""


@pytest.fixture(scope="module")
def guarded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaServer]:
    """A listener with an ACL file (``GUARDED_ACL``) and no tokens: every connection is the
    anonymous principal."""
    directory = tmp_path_factory.mktemp("kafka-acl")
    (directory / "acl.txt").write_text(GUARDED_ACL)
    guard = Guard(None, Acl.load(directory / "acl.txt"), mutual_tls=False)
    broker = Broker.open(directory / "data")
    listener = KafkaListener(broker, "127.0.0.1", 0, guard=guard)
    listener.start()
    try:
        yield KafkaServer(broker, listener)
    finally:
        listener.stop(grace_ms=2_000)
        broker.close()


class RawConnection:
    """A socket speaking the protocol through the same codec, for what clients never send."""

    def __init__(self, port: int) -> None:
        self.socket = socket.create_connection(
            ("127.0.0.1", port), timeout=CLIENT_TIMEOUT_MS / 1000
        )
        self.correlation_ids = itertools.count(1)

    def send_bytes(self, data: bytes) -> None:
        self.socket.sendall(data)

    def read_frame(self) -> bytes:
        """One answer frame without its size prefix; b"" when the server closed."""
        prefix = self._read(4)
        if not prefix:
            return b""
        (size,) = struct.unpack(">i", prefix)
        return self._read(size)

    def _read(self, size: int) -> bytes:
        chunks = b""
        while len(chunks) < size:
            chunk = self.socket.recv(size - len(chunks))
            if not chunk:
                return b""
            chunks += chunk
        return chunks

    def call(self, request: Any, response_class: Any, version: int) -> Any:
        correlation_id = next(self.correlation_ids)
        request.with_header(correlation_id=correlation_id, client_id="raw-test")
        self.socket.sendall(bytes(request.encode(version=version, header=True, framed=True)))
        frame = self.read_frame()
        assert frame, "the server closed the connection"
        answer = response_class.decode(io.BytesIO(frame), version=version, header=True)
        assert answer.header.correlation_id == correlation_id
        return answer

    def close(self) -> None:
        self.socket.close()


@pytest.fixture()
def connect(kafka_server: KafkaServer) -> Iterator[Callable[[], RawConnection]]:
    """Opens raw connections to the listener; all are closed after the test."""
    opened: list[RawConnection] = []

    def open_one() -> RawConnection:
        opened.append(RawConnection(kafka_server.listener.port))
        return opened[-1]

    try:
        yield open_one
    finally:
        for connection in opened:
            connection.close()


@pytest.fixture()
def raw(connect: Callable[[], RawConnection]) -> RawConnection:
    return connect()


@pytest.fixture()
def guarded_raw(guarded_server: KafkaServer) -> Iterator[RawConnection]:
    """A raw connection to ``guarded_server`` (as the anonymous principal)."""
    connection = RawConnection(guarded_server.listener.port)
    try:
        yield connection
    finally:
        connection.close()
