"""Topics created on a producer's first use, as Kafka's broker creates them
(``auto.create.topics.enable``, ``num.partitions``, the default replication factor), through
both doors of one real ``twinlog serve``: kafka-python's KafkaProducer over the Kafka
listener, twinlog's own Producer over gRPC. The caller needs CREATE on the topic; consumers
never create one; with the setting off nothing is created.
"""

from __future__ import annotations

import io
import re
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kafka
import kafka.errors
import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from server_process import ServerProcess

from twinlog.engine.base.errors import AuthorizationError, UnknownTopicOrPartitionError
from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client import Admin, Consumer, Producer
from twinlog.rpc.kafka.error_codes import (
    INVALID_TOPIC_EXCEPTION,
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from twinlog.rpc.kafka.listener import KafkaListener

CLIENT_TIMEOUT_MS = 10_000
MAKER = "maker-token-4f1c9a7e2b"  # may create the auto-* topics
WRITER = "writer-token-8d2e6b3c1a"  # may write and read them, not create them
TOKENS = f"{MAKER} maker\n{WRITER} writer\n"
ACL = """
maker  create  auto*
maker  write   auto*
maker  read    auto*
maker  read    group:auto*
writer write   auto*
writer read    auto*
"""
KAFKA_SERVING = re.compile(r"serving Kafka clients on 127\.0\.0\.1:(\d+)")
PARTITIONS = 3  # the server's num.partitions


class Served:
    def __init__(self, process: ServerProcess) -> None:
        self.process = process
        self.address = process.address
        found = KAFKA_SERVING.search(process.log())
        assert found, process.log()
        self.bootstrap = f"127.0.0.1:{found.group(1)}"

    def topics(self) -> list[str]:
        with Admin(self.address, token=MAKER) as admin:
            return admin.list_topics()

    def kafka_producer(self, user: str, password: str) -> Any:
        return kafka.KafkaProducer(
            bootstrap_servers=self.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username=user,
            sasl_plain_password=password,
            request_timeout_ms=CLIENT_TIMEOUT_MS,
            max_block_ms=5_000,
        )

    def audit_lines(self, topic: str) -> list[str]:
        """The audit log's lines naming ``topic`` (as topic= or, in acl.denied, name=)."""
        return [
            line
            for line in self.process.log().splitlines()
            if "twinlog.audit" in line and re.search(f"(topic|name)={topic}( |$)", line)
        ]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("auto-create")
    (directory / "tokens").write_text(TOKENS)
    (directory / "acl").write_text(ACL)
    with ServerProcess(
        directory / "data",
        "--kafka-listener", "127.0.0.1:0",
        "--tokens-file", str(directory / "tokens"),
        "--acl-file", str(directory / "acl"),
        "--config", f"num.partitions={PARTITIONS}",
    ) as process:  # fmt: skip
        deadline = time.monotonic() + 10
        while not KAFKA_SERVING.search(process.log()) and time.monotonic() < deadline:
            time.sleep(0.05)
        yield Served(process)


def test_a_kafka_producer_to_a_missing_topic_creates_it(served: Served) -> None:
    producer = served.kafka_producer("maker", MAKER)
    try:
        sent = producer.send("auto-kafka", b"first", key=b"k").get(timeout=10)
    finally:
        producer.close(timeout=5)
    assert sent.topic == "auto-kafka"
    with Admin(served.address, token=MAKER) as admin:
        assert len(admin.describe_topic("auto-kafka").partitions) == PARTITIONS
    log = served.process.log()
    assert (
        f"topic auto-kafka auto-created with {PARTITIONS} partitions, replication factor 1 "
        "(auto.create.topics.enable)" in log
    ), log
    created = [line for line in served.audit_lines("auto-kafka") if "topic.create" in line]
    assert len(created) == 1 and "door=kafka" in created[0] and "outcome=ok" in created[0]
    assert "principal=maker" in created[0], created


def test_without_create_a_kafka_producer_is_refused(served: Served) -> None:
    producer = served.kafka_producer("writer", WRITER)
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            producer.send("auto-refused-kafka", b"x").get(timeout=10)
    finally:
        producer.close(timeout=5)
    assert "auto-refused-kafka" not in served.topics()
    denied = [line for line in served.audit_lines("auto-refused-kafka") if "acl.denied" in line]
    assert denied and "action=create" in denied[0] and "principal=writer" in denied[0]


def test_a_twinlog_producer_to_a_missing_topic_creates_it(served: Served) -> None:
    with Producer(served.address, token=MAKER) as producer:
        sent = producer.send("auto-grpc", b"over grpc", key=b"k").result(timeout=10)
    with Consumer(served.address, token=MAKER) as consumer:
        consumer.assign([("auto-grpc", sent.partition)])
        consumer.seek_to_beginning()
        found: list[Any] = []
        deadline = time.monotonic() + 10
        while not found and time.monotonic() < deadline:
            found = consumer.poll(timeout_ms=500)
    assert [(record.key, record.value) for record in found] == [(b"k", b"over grpc")]
    with Admin(served.address, token=MAKER) as admin:
        assert len(admin.describe_topic("auto-grpc").partitions) == PARTITIONS
    created = [line for line in served.audit_lines("auto-grpc") if "topic.create" in line]
    assert len(created) == 1 and "auto_created=true" in created[0], created
    assert "door=kafka" not in created[0] and "outcome=ok" in created[0]


def test_without_create_a_twinlog_producer_is_told_what_is_missing(served: Served) -> None:
    with Producer(served.address, token=WRITER) as producer:
        with pytest.raises(AuthorizationError, match=r"needs CREATE.*'writer create auto-"):
            producer.send("auto-refused-grpc", b"x")
    assert "auto-refused-grpc" not in served.topics()
    assert any("acl.denied" in line for line in served.audit_lines("auto-refused-grpc"))


def test_a_consumer_of_a_missing_topic_does_not_create_it(served: Served) -> None:
    with Consumer(served.address, token=MAKER, group_id="auto-readers") as consumer:
        consumer.subscribe(["auto-unread"])
        consumer.poll(timeout_ms=300)
    with pytest.raises(UnknownTopicOrPartitionError):
        with Consumer(served.address, token=MAKER) as consumer:
            consumer.assign([("auto-unread", 0)])
            consumer.seek_to_beginning()
            consumer.poll(timeout_ms=300)
    assert "auto-unread" not in served.topics()


# --- the Kafka door's Metadata answers, on an in-process listener -------------------------


def _metadata(port: int, names: list[str], allow: bool = True) -> list[Any]:
    """One Metadata v9 request on a connection of its own: the answer's topics."""
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=name) for name in names],
        allow_auto_topic_creation=allow,
    )
    request.with_header(correlation_id=1, client_id="auto-create-test")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(bytes(request.encode(version=9, header=True, framed=True)))
        (size,) = struct.unpack(">i", _read(connection, 4))
        frame = _read(connection, size)
    return list(MetadataResponse.decode(io.BytesIO(frame), version=9, header=True).topics)


def _read(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        assert chunk, "the listener closed the connection"
        data += chunk
    return data


def test_metadata_creates_only_what_it_may(kafka_server: Any) -> None:
    """The module's listener has the broker's defaults: the setting on, one partition."""
    port = kafka_server.listener.port
    created, internal, invalid = _metadata(port, ["auto-raw", "__auto", "bad/name"])
    assert (created.error_code, len(created.partitions)) == (NONE, 1)
    assert internal.error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert invalid.error_code == INVALID_TOPIC_EXCEPTION
    (not_allowed,) = _metadata(port, ["auto-not-allowed"], allow=False)
    assert not_allowed.error_code == UNKNOWN_TOPIC_OR_PARTITION
    names = kafka_server.broker.list_topics()
    assert "auto-raw" in names and "auto-not-allowed" not in names


def test_with_the_setting_off_nothing_is_created(tmp_path: Path) -> None:
    broker = Broker.open(tmp_path / "data", auto_create_topics_enable=False)
    listener = KafkaListener(broker, "127.0.0.1", 0)
    listener.start()
    try:
        (answer,) = _metadata(listener.port, ["auto-off"])
        assert answer.error_code == UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(
            UnknownTopicOrPartitionError, match=r"auto\.create\.topics\.enable=false"
        ):
            with Producer(broker) as producer:
                producer.send("auto-off", b"x")
        assert broker.list_topics() == []
    finally:
        listener.stop(grace_ms=2_000)
        broker.close()


def test_a_twinlog_producer_naming_its_partition_creates_the_topic(served: Served) -> None:
    """As Kafka's producer, a send naming its partition waits for the topic's metadata
    too, so the topic is created; a partition the topic lacks is refused at once."""
    with Producer(served.address, token=MAKER) as producer:
        sent = producer.send("auto-partitioned", b"to 2", partition=2).result(timeout=10)
        with pytest.raises(
            UnknownTopicOrPartitionError, match=rf"has {PARTITIONS} partitions.*no partition 7"
        ):
            producer.send("auto-partitioned", b"nowhere", partition=7)
    assert (sent.topic, sent.partition, sent.offset) == ("auto-partitioned", 2, 0)
    with Admin(served.address, token=MAKER) as admin:
        assert len(admin.describe_topic("auto-partitioned").partitions) == PARTITIONS
    created = [line for line in served.audit_lines("auto-partitioned") if "topic.create" in line]
    assert len(created) == 1 and "auto_created=true" in created[0], created


def test_with_the_setting_off_a_send_naming_its_partition_fails_within_max_block(
    tmp_path: Path,
) -> None:
    (tmp_path / "tokens").write_text(TOKENS)
    (tmp_path / "acl").write_text(ACL)
    with ServerProcess(
        tmp_path / "data",
        "--tokens-file", str(tmp_path / "tokens"),
        "--acl-file", str(tmp_path / "acl"),
        "--config", "auto.create.topics.enable=false",
    ) as process:  # fmt: skip
        with Producer(process.address, token=MAKER, max_block_ms=3_000) as producer:
            started = time.monotonic()
            with pytest.raises(
                UnknownTopicOrPartitionError, match=r"auto\.create\.topics\.enable=false"
            ):
                producer.send("auto-off-partitioned", b"x", partition=0)
            waited_s = time.monotonic() - started
        with Admin(process.address, token=MAKER) as admin:
            assert "auto-off-partitioned" not in admin.list_topics()
    assert waited_s < 3.0 + 1.0, waited_s  # max_block_ms, and some slack for a busy machine
