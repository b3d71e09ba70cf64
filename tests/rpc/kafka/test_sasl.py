"""SASL/PLAIN onto the tokens file, and the ACL file on every Kafka request: kafka-python
and confluent-kafka clients authenticate as principals and get Kafka's authorization
errors where twinlog's grants say no."""

from __future__ import annotations

import io
import logging
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import kafka
import kafka.errors
import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client import Admin
from twinlog.rpc.kafka.listener import KafkaListener
from twinlog.rpc.policy.audit import AUDIT_LOGGER
from twinlog.rpc.policy.auth import Acl, Guard, TokenTable

CLIENT_TIMEOUT_MS = 10_000
ALICE_TOKEN = "alice-secret-token"
BOB_TOKEN = "bob-secret-token"
ACL = """
alice  write  orders*
alice  read   orders*
alice  read   group:billing*
alice  write  transactional-id:loader*
bob    read   orders*
"""


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, KafkaListener]]:
    directory = tmp_path_factory.mktemp("sasl")
    (directory / "acl.txt").write_text(ACL)
    guard = Guard(
        TokenTable([(ALICE_TOKEN, "alice"), (BOB_TOKEN, "bob")]),
        Acl.load(directory / "acl.txt"),
        mutual_tls=False,
    )
    broker = Broker.open(directory / "data")
    for name in ("orders", "secrets"):
        Admin(broker).create_topic(name, partitions=1)
    listener = KafkaListener(broker, "127.0.0.1", 0, guard=guard)
    listener.start()
    try:
        yield broker, listener
    finally:
        listener.stop(grace_ms=2_000)
        broker.close()


def sasl(user: str, password: str) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        "request_timeout_ms": CLIENT_TIMEOUT_MS,
    }


def test_an_authenticated_principal_produces_and_consumes(secured: Any) -> None:
    _, listener = secured
    bootstrap = f"127.0.0.1:{listener.port}"
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        max_block_ms=CLIENT_TIMEOUT_MS,
        **sasl("alice", ALICE_TOKEN),
    )
    try:
        producer.send("orders", b"from alice", partition=0).get(timeout=10)
    finally:
        producer.close(timeout=5)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "bob",
            "sasl.password": BOB_TOKEN,
            "socket.timeout.ms": CLIENT_TIMEOUT_MS,
        }
    )
    try:
        consumer.assign(
            [confluent_kafka.TopicPartition("orders", 0, confluent_kafka.OFFSET_BEGINNING)]
        )
        message = None
        deadline = time.monotonic() + 10
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.2)
        assert message is not None and message.error() is None
        assert message.value() == b"from alice"
        topics = consumer.list_topics(timeout=10).topics
        assert "orders" in topics and "secrets" not in topics  # listed only to readers
    finally:
        consumer.close()


def _frame(connection: socket.socket) -> bytes:
    data = b""
    while len(data) < 4:
        chunk = connection.recv(4 - len(data))
        if not chunk:
            return b""
        data += chunk
    (size,) = struct.unpack(">i", data)
    body = b""
    while len(body) < size:
        body += connection.recv(size - len(body))
    return body


def _authenticate(connection: socket.socket, user: str, password: str) -> Any:
    return _login(connection, "PLAIN", f"\0{user}\0{password}".encode())


def _login(connection: socket.socket, mechanism: str, message: bytes) -> Any:
    """SaslHandshake v1 choosing ``mechanism``, then SaslAuthenticate v2 carrying
    ``message``: the SaslAuthenticate answer."""
    for number, request, response_class, version in (
        (1, SaslHandshakeRequest(mechanism=mechanism), SaslHandshakeResponse, 1),
        (2, SaslAuthenticateRequest(auth_bytes=message), SaslAuthenticateResponse, 2),
    ):
        request.with_header(correlation_id=number, client_id="sasl-test")
        connection.sendall(bytes(request.encode(version=version, header=True, framed=True)))
        answer = response_class.decode(io.BytesIO(_frame(connection)), version=version, header=True)
    return answer


@pytest.mark.parametrize(
    "user, password", [("alice", BOB_TOKEN), ("alice", "guess"), ("mallory", ALICE_TOKEN)]
)
def test_a_wrong_password_is_refused_and_the_connection_closed(
    secured: Any, user: str, password: str, caplog: pytest.LogCaptureFixture
) -> None:
    _, listener = secured
    connection = socket.create_connection(("127.0.0.1", listener.port), timeout=5)
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        try:
            answer = _authenticate(connection, user, password)
            assert answer.error_code == kafka.errors.SaslAuthenticationFailedError.errno
            assert password not in answer.error_message
            assert _frame(connection) == b""  # closed after the answer
            local_port = connection.getsockname()[1]
        finally:
            connection.close()
    _assert_audited_failure(caplog, local_port, password)


def _assert_audited_failure(
    caplog: pytest.LogCaptureFixture, client_port: int, password: str
) -> None:
    """The audit log has the failed login, naming the client's address, never the password."""
    lines = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    failed = [line for line in lines if line.startswith("authentication.failed ")]
    assert any("door=kafka" in line and f":{client_port}" in line for line in failed), lines
    assert not any(password in line for line in lines), lines


def test_grants_are_enforced_with_kafka_error_codes(secured: Any) -> None:
    broker, listener = secured
    bootstrap = f"127.0.0.1:{listener.port}"
    end_before = broker.list_offset("orders", 0, "latest")
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap, max_block_ms=3_000, **sasl("bob", BOB_TOKEN)
    )
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            producer.send("orders", b"bob may only read", partition=0).get(timeout=10)
    finally:
        producer.close(timeout=5)
    transactional = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id="not-a-loader",
        max_block_ms=3_000,
        **sasl("alice", ALICE_TOKEN),
    )
    try:
        with pytest.raises(kafka.errors.TransactionalIdAuthorizationFailedError):
            transactional.init_transactions()
    finally:
        transactional.close(timeout=5)
    committer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, group_id="payroll", **sasl("alice", ALICE_TOKEN)
    )
    try:
        partition = kafka.TopicPartition("orders", 0)
        committer.assign([partition])
        with pytest.raises(kafka.errors.GroupAuthorizationFailedError):
            committer.commit({partition: kafka.structs.OffsetAndMetadata(1, "", -1)})
    finally:
        committer.close()
    assert broker.list_offset("orders", 0, "latest") == end_before  # nothing of bob's


def test_a_request_before_authentication_closes_the_connection(secured: Any) -> None:
    _, listener = secured
    connection = socket.create_connection(("127.0.0.1", listener.port), timeout=5)
    try:
        request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
        request.with_header(correlation_id=1, client_id="anonymous")
        connection.sendall(bytes(request.encode(version=12, header=True, framed=True)))
        assert connection.recv(4) == b""
    finally:
        connection.close()


def _handshake_v0(connection: socket.socket) -> Any:
    request = SaslHandshakeRequest(mechanism="PLAIN")
    request.with_header(correlation_id=1, client_id="sasl-v0-test")
    connection.sendall(bytes(request.encode(version=0, header=True, framed=True)))
    return SaslHandshakeResponse.decode(io.BytesIO(_frame(connection)), version=0, header=True)


def _recv_exactly(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            return data  # closed
        data += chunk
    return data


def test_handshake_v0_takes_the_plain_message_as_a_frame_of_its_own(secured: Any) -> None:
    """Kafka before KIP-152: after SaslHandshake v0 the client sends PLAIN's message as a
    bare frame and gets an empty frame back; requests follow as the principal."""
    _, listener = secured
    connection = socket.create_connection(("127.0.0.1", listener.port), timeout=5)
    try:
        assert _handshake_v0(connection).error_code == 0
        message = f"\0alice\0{ALICE_TOKEN}".encode()
        connection.sendall(struct.pack(">i", len(message)) + message)
        assert _recv_exactly(connection, 4) == struct.pack(">i", 0)
        request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
        request.with_header(correlation_id=2, client_id="sasl-v0-test")
        connection.sendall(bytes(request.encode(version=12, header=True, framed=True)))
        answer = MetadataResponse.decode(io.BytesIO(_frame(connection)), version=12, header=True)
        names = {topic.name for topic in answer.topics}
        assert "orders" in names and "secrets" not in names  # alice's grants, not anonymous
    finally:
        connection.close()


def test_handshake_v0_with_a_wrong_password_closes_the_connection(
    secured: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _, listener = secured
    connection = socket.create_connection(("127.0.0.1", listener.port), timeout=5)
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        try:
            assert _handshake_v0(connection).error_code == 0
            message = f"\0alice\0{BOB_TOKEN}".encode()
            connection.sendall(struct.pack(">i", len(message)) + message)
            assert _recv_exactly(connection, 4) == b""  # closed, nothing answered
            local_port = connection.getsockname()[1]
        finally:
            connection.close()
    _assert_audited_failure(caplog, local_port, BOB_TOKEN)


def test_kcat_authenticates_with_sasl_plain(secured: Any) -> None:
    """librdkafka 2.0 (kcat from the distribution) requires SaslHandshake v0 to be listed
    before it uses PLAIN at all."""
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed: `apt-get install kcat` (README)"
    _, listener = secured

    def run(password: str, *arguments: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        sasl = [
            "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
            "-X", "sasl.username=alice", "-X", f"sasl.password={password}",
        ]  # fmt: skip
        return subprocess.run(
            [kcat, "-b", f"127.0.0.1:{listener.port}", *sasl, *arguments],
            input=stdin, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    sent = run(ALICE_TOKEN, "-P", "-t", "orders", "-p", "0", stdin="by-kcat\n")
    assert sent.returncode == 0, sent.stderr
    read = run(ALICE_TOKEN, "-C", "-t", "orders", "-o", "beginning", "-e", "-f", "%s\\n")
    assert read.returncode == 0 and "by-kcat" in read.stdout.split(), read.stderr
    refused = run(BOB_TOKEN, "-L", "-m", "2")
    assert refused.returncode != 0 and "uthentication" in refused.stderr, refused.stderr
