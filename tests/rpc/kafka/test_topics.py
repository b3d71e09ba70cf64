"""CreateTopics and DeleteTopics from kafka-python's and confluent-kafka's admin clients."""

from __future__ import annotations

from typing import Any

import kafka.errors
import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as ConfluentNewTopic
from kafka.admin import KafkaAdminClient, NewTopic

CLIENT_TIMEOUT_MS = 10_000


def test_kafka_python_admin_creates_and_deletes_topics(kafka_server: Any) -> None:
    admin = KafkaAdminClient(
        bootstrap_servers=kafka_server.bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS
    )
    try:
        admin.create_topics([NewTopic("made-by-kafka-python", 3, 1)])
        assert len(kafka_server.broker.describe_topic("made-by-kafka-python").partitions) == 3
        with pytest.raises(kafka.errors.TopicAlreadyExistsError):
            admin.create_topics([NewTopic("made-by-kafka-python", 1, 1)])
        with pytest.raises(kafka.errors.InvalidReplicationFactorError):
            admin.create_topics([NewTopic("three-replicas", 1, 3)])
        admin.delete_topics(["made-by-kafka-python"])
    finally:
        admin.close()
    names = kafka_server.broker.list_topics()
    assert "made-by-kafka-python" not in names and "three-replicas" not in names


def test_confluent_admin_creates_a_topic_with_settings(kafka_server: Any) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    futures = admin.create_topics(
        [ConfluentNewTopic("made-by-confluent", 2, 1, config={"cleanup.policy": "compact"})],
        request_timeout=10,
    )
    futures["made-by-confluent"].result(timeout=15)
    description = kafka_server.broker.describe_topic("made-by-confluent")
    assert len(description.partitions) == 2
    assert description.config.get("cleanup.policy") == "compact"


def test_an_unknown_or_bad_topic_setting_is_invalid_config(kafka_server: Any) -> None:
    """As Kafka answers: INVALID_CONFIG (40) naming the setting, not INVALID_REQUEST."""
    admin = KafkaAdminClient(
        bootstrap_servers=kafka_server.bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS
    )
    try:
        for name, configs in (
            ("unknown-setting", {"no.such.setting": "1"}),
            ("bad-value", {"retention.ms": "soon"}),
        ):
            with pytest.raises(kafka.errors.InvalidConfigurationError) as refused:
                admin.create_topics([NewTopic(name, 1, 1, topic_configs=configs)])
            assert next(iter(configs)) in str(refused.value)
    finally:
        admin.close()
    names = kafka_server.broker.list_topics()
    assert "unknown-setting" not in names and "bad-value" not in names
