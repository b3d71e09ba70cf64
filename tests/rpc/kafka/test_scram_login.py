"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 on the Kafka listener, with a real kafka-python
client: a user whose credential ``twinlog users set-scram`` (here: the store) holds
produces and consumes as its principal, under the ACL file's grants; a wrong password is
refused, audited without the password, and writes nothing."""

from __future__ import annotations

import io
import logging
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kafka
import kafka.errors
import pytest
from kafka.net.compat import KafkaNetClient
from kafka.net.sasl.scram import ScramClient
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.sasl import SaslHandshakeRequest, SaslHandshakeResponse
from test_sasl import _recv_exactly

from twinlog.engine.broker.broker import Broker
from twinlog.rpc.kafka.listener import KafkaListener
from twinlog.rpc.policy.audit import AUDIT_LOGGER
from twinlog.rpc.policy.auth import Acl, Guard, TokenTable
from twinlog.rpc.policy.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential
from twinlog.rpc.policy.scram_store import file_scram_store

TOPIC = "scrammed"
PASSWORD = "carol's long passphrase"
ACL = f"""
carol  all   {TOPIC}
carol  read  group:*
"""
CLIENT_TIMEOUT_MS = 10_000


@dataclass
class Listening:
    broker: Broker
    listener: KafkaListener
    data_dir: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.listener.port}"


@pytest.fixture(scope="module")
def listening(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listening]:
    directory = tmp_path_factory.mktemp("kafka-scram")
    (directory / "acl.txt").write_text(ACL)
    guard = Guard(
        TokenTable([("carol-token-unused", "carol")]),
        Acl.load(directory / "acl.txt"),
        mutual_tls=False,
    )
    data_dir = directory / "data"
    broker = Broker.open(data_dir)
    broker.create_topic(TOPIC, 1)
    store = file_scram_store(data_dir)
    for mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
        store.set("carol", ScramCredential.from_password(mechanism, PASSWORD, 4096))
    listener = KafkaListener(broker, "127.0.0.1", 0, guard=guard)
    listener.start()
    try:
        yield Listening(broker, listener, data_dir)
    finally:
        listener.stop(grace_ms=2_000)
        broker.close()


def scram(mechanism: str, password: str) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "carol",
        "sasl_plain_password": password,
        "request_timeout_ms": CLIENT_TIMEOUT_MS,
    }


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_a_scram_user_produces_and_consumes_as_its_principal(
    listening: Listening, mechanism: str
) -> None:
    value = f"by {mechanism}".encode()
    producer = kafka.KafkaProducer(
        bootstrap_servers=listening.bootstrap, **scram(mechanism, PASSWORD)
    )
    try:
        producer.send(TOPIC, value, partition=0).get(timeout=10)
    finally:
        producer.close(timeout=5)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=listening.bootstrap,
        consumer_timeout_ms=3_000,
        **scram(mechanism, PASSWORD),
    )
    try:
        consumer.assign([kafka.TopicPartition(TOPIC, 0)])
        consumer.seek_to_beginning()
        values = [record.value for record in consumer]
    finally:
        consumer.close()
    assert value in values


def test_a_wrong_password_is_refused_audited_and_writes_nothing(
    listening: Listening, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "not " + PASSWORD
    end_before = listening.broker.list_offset(TOPIC, 0, "latest")
    made: list[Any] = []

    def kept_client(**configs: Any) -> Any:
        made.append(KafkaNetClient(**configs))
        return made[-1]

    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        try:
            with pytest.raises(kafka.errors.KafkaError):
                producer = kafka.KafkaProducer(
                    bootstrap_servers=listening.bootstrap,
                    bootstrap_timeout_ms=1_500,
                    kafka_client=kept_client,
                    **scram(SCRAM_SHA_512, wrong),
                )
                producer.send(TOPIC, b"never", partition=0).get(timeout=5)
        finally:
            for client in made:
                client.close()
    audited = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    failed = [line for line in audited if line.startswith("authentication.failed ")]
    assert failed, audited
    assert "mechanism=SCRAM-SHA-512" in failed[0] and "user=carol" in failed[0]
    assert "door=kafka" in failed[0]
    assert not any(wrong in line or PASSWORD in line for line in audited), audited
    assert listening.broker.list_offset(TOPIC, 0, "latest") == end_before


def _bare_frame(connection: socket.socket, payload: bytes) -> bytes:
    """Send a frame of its own (no request header) and read the frame answered (b"":
    the connection was closed)."""
    connection.sendall(struct.pack(">i", len(payload)) + payload)
    size = _recv_exactly(connection, 4)
    if len(size) < 4:
        return b""
    return _recv_exactly(connection, struct.unpack(">i", size)[0])


def _handshake_v0(connection: socket.socket, mechanism: str) -> int:
    request = SaslHandshakeRequest(mechanism=mechanism)
    request.with_header(correlation_id=1, client_id="scram-v0-test")
    answer = _bare_frame(connection, bytes(request.encode(version=0, header=True)))
    return int(SaslHandshakeResponse.decode(io.BytesIO(answer), version=0, header=True).error_code)


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_after_handshake_v0_the_scram_messages_are_frames_of_their_own(
    listening: Listening, mechanism: str
) -> None:
    """KIP-43's v0, as Kafka serves it: client-first and client-final each as a bare frame,
    each answered by the server's message as a bare frame; requests follow as the user."""
    connection = socket.create_connection(("127.0.0.1", listening.listener.port), timeout=5)
    try:
        assert _handshake_v0(connection, mechanism) == 0
        client = ScramClient("carol", PASSWORD, mechanism)
        client.process_server_first_message(_bare_frame(connection, client.first_message()))
        client.process_server_final_message(_bare_frame(connection, client.final_message()))
        request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
        request.with_header(correlation_id=2, client_id="scram-v0-test")
        answer = _bare_frame(connection, bytes(request.encode(version=12, header=True)))
        names = {t.name for t in MetadataResponse.decode(io.BytesIO(answer), 12, True).topics}
        assert TOPIC in names  # carol's grants: the anonymous principal sees none
    finally:
        connection.close()


def test_after_handshake_v0_a_wrong_scram_proof_closes_the_connection_audited(
    listening: Listening, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "not " + PASSWORD
    connection = socket.create_connection(("127.0.0.1", listening.listener.port), timeout=5)
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        try:
            assert _handshake_v0(connection, SCRAM_SHA_256) == 0
            client = ScramClient("carol", wrong, SCRAM_SHA_256)
            client.process_server_first_message(_bare_frame(connection, client.first_message()))
            assert _bare_frame(connection, client.final_message()) == b""  # closed, no answer
        finally:
            connection.close()
    audited = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    failed = [line for line in audited if line.startswith("authentication.failed ")]
    assert any("mechanism=SCRAM-SHA-256" in line and "user=carol" in line for line in failed)
    assert not any(wrong in line or PASSWORD in line for line in audited), audited
