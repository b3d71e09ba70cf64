"""Kafka's grantable operations beyond twinlog's first seven, through the Kafka listener with
unmodified clients: what ``kafka-acls.sh --producer`` and ``--consumer`` grant (DESCRIBE and
CREATE on the topic, DESCRIBE on the transactional id, IDEMPOTENT_WRITE on the cluster) is
accepted whole and lets the principal run transactions; DESCRIBE shows a topic and reads
nothing; ALTER_CONFIGS and DESCRIBE_CONFIGS govern a topic's settings; CREATE on the cluster
creates any topic; CLUSTER_ACTION is refused saying why."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import kafka
import kafka.errors
import pytest
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewTopic,
    ResourcePattern,
    ResourceType,
)

from twinlog.rpc.client import Consumer
from twinlog.rpc.server.config import ServerConfig
from twinlog.tests.rpc.kafka.test_acl_administration import (
    TOKENS,
    Secured,
    admin_of,
    listening,
    sasl,
)

ACL_FILE = "ops alter cluster:*\n"
TOPICS = ("orders", "refunds", "configured")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    directory = tmp_path_factory.mktemp("kafka-acl-operations")
    (directory / "tokens").write_text("".join(f"{t} {p}\n" for p, t in TOKENS.items()))
    (directory / "acl").write_text(ACL_FILE)
    config = ServerConfig(
        port=0, tokens_file=str(directory / "tokens"), acl_file=str(directory / "acl")
    )
    with listening(Path(directory), config, TOPICS) as served:
        yield served


def allow(user: str, operation: ACLOperation, kind: ResourceType, name: str) -> ACL:
    return ACL(
        principal=f"User:{user}",
        host="*",
        operation=operation,
        permission_type=ACLPermissionType.ALLOW,
        resource_pattern=ResourcePattern(kind, name, ACLResourcePatternType.LITERAL),
    )


def grant_as_ops(secured: Secured, acls: list[ACL]) -> dict[str, Any]:
    admin = admin_of(secured, "ops")
    try:
        result: dict[str, Any] = admin.create_acls(acls)
        return result
    finally:
        admin.close()


def test_kafka_acls_producer_grants_are_accepted_whole_and_let_a_transaction_commit(
    secured: Secured,
) -> None:
    # kafka-acls.sh --add --allow-principal User:carol --producer --topic orders
    #   --transactional-id carol-tx --idempotent
    created = grant_as_ops(
        secured,
        [
            allow("carol", ACLOperation.WRITE, ResourceType.TOPIC, "orders"),
            allow("carol", ACLOperation.DESCRIBE, ResourceType.TOPIC, "orders"),
            allow("carol", ACLOperation.CREATE, ResourceType.TOPIC, "orders"),
            allow("carol", ACLOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "carol-tx"),
            allow("carol", ACLOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, "carol-tx"),
            allow("carol", ACLOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, "kafka-cluster"),
        ],
    )
    assert created["failed"] == [] and len(created["succeeded"]) == 6, created
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": secured.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "carol",
            "sasl.password": TOKENS["carol"],
            "transactional.id": "carol-tx",
        }
    )
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce("orders", b"by carol", partition=0)
    producer.commit_transaction(10)
    assert any(r.value == b"by carol" for r in read_committed(secured, "orders"))


def read_committed(secured: Secured, topic: str) -> list[Any]:
    """Every record of ``topic``'s partition 0 once one is there (a commit is copied into
    the log after it is answered), within 10 s."""
    found: list[Any] = []
    with Consumer(secured.broker) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 10
        while not found and time.monotonic() < deadline:
            found += consumer.poll(timeout_ms=500)
    return found


def topics_seen_by(secured: Secured, user: str) -> set[str]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=secured.bootstrap, **sasl(user))
    try:
        return set(consumer.topics())
    finally:
        consumer.close()


def test_describe_shows_a_topic_and_reads_nothing(secured: Secured) -> None:
    assert "refunds" not in topics_seen_by(secured, "dave")
    created = grant_as_ops(
        secured, [allow("dave", ACLOperation.DESCRIBE, ResourceType.TOPIC, "refunds")]
    )
    assert created["failed"] == [], created
    assert "refunds" in topics_seen_by(secured, "dave")
    assert "orders" not in topics_seen_by(secured, "dave")
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=secured.bootstrap, consumer_timeout_ms=3_000, **sasl("dave")
    )
    try:
        consumer.assign([kafka.TopicPartition("refunds", 0)])
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            consumer.poll(timeout_ms=5_000)
            consumer.poll(timeout_ms=5_000)
    finally:
        consumer.close()


def settings_seen_by(admin: KafkaAdminClient, topic: str) -> dict[str, Any]:
    """The topic's settings DescribeConfigs gives (kafka-python leaves a refused resource
    empty rather than raise)."""
    described = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"
    )
    settings: dict[str, Any] = described["topic"][topic]
    return settings


def test_alter_configs_and_describe_configs_govern_a_topics_settings(secured: Secured) -> None:
    setting = [ConfigResource(ConfigResourceType.TOPIC, "configured", {"retention.ms": "3600000"})]
    admin = admin_of(secured, "dave")
    try:
        assert settings_seen_by(admin, "configured") == {}
        admin.alter_configs(setting, raise_on_unknown=False)
        assert secured.broker.describe_topic("configured").config == {}
        created = grant_as_ops(
            secured,
            [allow("dave", ACLOperation.ALTER_CONFIGS, ResourceType.TOPIC, "configured")],
        )
        assert created["failed"] == [], created
        admin.alter_configs(setting, raise_on_unknown=False)
        assert secured.broker.describe_topic("configured").config == {"retention.ms": "3600000"}
        # ALTER_CONFIGS implies DESCRIBE_CONFIGS, as in Kafka
        assert settings_seen_by(admin, "configured")["retention.ms"]["value"] == "3600000"
        # DESCRIBE_CONFIGS alone shows settings and changes none
        assert settings_seen_by(admin, "refunds") == {}
        grant_as_ops(
            secured, [allow("dave", ACLOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, "refunds")]
        )
        assert "retention.ms" in settings_seen_by(admin, "refunds")
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "refunds", {"retention.ms": "60000"})],
            raise_on_unknown=False,
        )
        assert secured.broker.describe_topic("refunds").config == {}
    finally:
        admin.close()


def test_create_on_the_cluster_creates_any_topic(secured: Secured) -> None:
    admin = admin_of(secured, "dave")
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            admin.create_topics([NewTopic("dave-first", 1, 1)])
        created = grant_as_ops(
            secured, [allow("dave", ACLOperation.CREATE, ResourceType.CLUSTER, "kafka-cluster")]
        )
        assert created["failed"] == [], created
        admin.create_topics([NewTopic("dave-second", 1, 1)])
    finally:
        admin.close()
    assert "dave-second" in secured.broker.list_topics()
    assert "dave-first" not in secured.broker.list_topics()


def test_cluster_action_and_tokens_are_refused_saying_why(secured: Secured) -> None:
    created = grant_as_ops(
        secured,
        [
            allow("dave", ACLOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster"),
            allow("dave", ACLOperation.CREATE_TOKENS, ResourceType.CLUSTER, "kafka-cluster"),
        ],
    )
    assert created["failed"] == [kafka.errors.InvalidRequestError] * 2, created


def operations_seen(secured: Secured, user: str) -> tuple[set[str], set[str]]:
    """(the cluster's, topic orders') authorized operations confluent-kafka shows ``user``."""
    admin = confluent_kafka.admin.AdminClient(
        {
            "bootstrap.servers": secured.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": TOKENS[user],
        }
    )
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=10)
    topics = admin.describe_topics(
        confluent_kafka.TopicCollection(["orders"]),
        include_authorized_operations=True,
        request_timeout=10,
    )
    return (
        {operation.name for operation in cluster.result().authorized_operations},
        {operation.name for operation in topics["orders"].result().authorized_operations},
    )


def test_authorized_operations_are_what_the_grants_allow(secured: Secured) -> None:
    created = grant_as_ops(
        secured,
        [
            allow("bob", ACLOperation.READ, ResourceType.TOPIC, "orders"),
            allow("bob", ACLOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, "kafka-cluster"),
        ],
    )
    assert created["failed"] == [], created
    cluster, orders = operations_seen(secured, "bob")
    assert cluster == {"DESCRIBE_CONFIGS"}
    assert orders == {"READ", "DESCRIBE", "DESCRIBE_CONFIGS"}  # read implies the other two
    cluster, _ = operations_seen(secured, "ops")  # the ACL file's 'ops alter cluster:*'
    assert cluster == {"ALTER", "DESCRIBE"}
