"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 on the Kafka listener, with a real kafka-python
client: a user whose credential ``twinlog users set-scram`` (here: the store) holds
produces and consumes as its principal, under the ACL file's grants; a wrong password is
refused, audited without the password, and writes nothing."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kafka
import kafka.errors
import pytest
from kafka.net.compat import KafkaNetClient

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
