"""CreateTopics and DeleteTopics from kafka-python's and confluent-kafka's admin clients."""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

import kafka.errors
import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as ConfluentNewTopic
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin import DeleteTopicsRequest, DeleteTopicsResponse

from twinlog.rpc.policy.audit import AUDIT_LOGGER

CLIENT_TIMEOUT_MS = 10_000


def test_kafka_python_admin_creates_and_deletes_topics(
    kafka_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    admin = KafkaAdminClient(
        bootstrap_servers=kafka_server.bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS
    )
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
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
    # Topic changes through the Kafka door reach the audit log, as the gRPC door's do.
    audited = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    mine = [line for line in audited if "topic=made-by-kafka-python" in line]
    assert [line.split()[0] for line in mine] == ["topic.create", "topic.create", "topic.delete"]
    assert all("door=kafka" in line for line in mine), mine
    outcomes = [re.search(r"outcome=(\w+)", line).group(1) for line in mine]  # type: ignore[union-attr]
    assert outcomes == ["ok", "failed", "ok"], mine


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


def test_delete_topics_v6_by_name_and_by_topic_id(kafka_server: Any, raw: Any) -> None:
    """Clients of Kafka 2.8 on send DeleteTopics v6, naming topics by name or by id."""
    by_name, by_id = kafka_server.topic(), kafka_server.topic()
    topic_id = uuid.UUID(hex=kafka_server.broker.describe_topic(by_id).topic_id)
    unknown = uuid.uuid4()
    State = DeleteTopicsRequest.DeleteTopicState
    request = DeleteTopicsRequest(
        topics=[
            State(name=by_name, topic_id=None),
            State(name=None, topic_id=topic_id),
            State(name=None, topic_id=unknown),
        ],
        timeout_ms=CLIENT_TIMEOUT_MS,
    )
    answer = raw.call(request, DeleteTopicsResponse, 6)
    results = [(r.name, r.topic_id, r.error_code) for r in answer.responses]
    assert results[0][0] == by_name and results[0][2] == 0
    assert results[1] == (by_id, topic_id, 0)
    assert results[2][1:] == (unknown, kafka.errors.UnknownTopicIdError.errno)
    names = kafka_server.broker.list_topics()
    assert by_name not in names and by_id not in names
