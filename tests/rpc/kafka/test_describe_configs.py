"""DescribeConfigs of topics, as Kafka's admin clients and tools ask: every topic setting
under Kafka's name, those the topic sets told apart from the broker's defaults."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ConfigResource as ConfluentResource
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from twinlog.rpc.client import Admin
from twinlog.rpc.kafka.error_codes import INVALID_REQUEST, NONE, UNKNOWN_TOPIC_OR_PARTITION

CLIENT_TIMEOUT_MS = 10_000
TOPIC_TYPE, BROKER_TYPE = 2, 4


def test_kafka_python_shows_the_settings_a_topic_sets(kafka_server: Any) -> None:
    Admin(kafka_server.broker).create_topic(
        "configured", 1, {"cleanup.policy": "compact", "retention_ms": "3600000"}
    )
    admin = KafkaAdminClient(
        bootstrap_servers=kafka_server.bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS
    )
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "configured")])
    finally:
        admin.close()
    settings = described["topic"]["configured"]  # kafka-python leaves the defaults out
    assert {name: entry["value"] for name, entry in settings.items()} == {
        "cleanup.policy": "compact",
        "retention.ms": "3600000",  # set in twinlog's spelling, named as Kafka names it
    }
    assert {entry["config_source"] for entry in settings.values()} == {"DYNAMIC_TOPIC_CONFIG"}


@pytest.mark.slow  # librdkafka's admin client
def test_confluent_describes_every_setting_with_the_defaults(kafka_server: Any) -> None:
    topic = kafka_server.topic()
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    futures = admin.describe_configs([ConfluentResource("topic", topic)], request_timeout=10)
    (described,) = [future.result(timeout=15) for future in futures.values()]
    assert described["max.message.bytes"].value == str(8 << 20)
    assert (
        described["segment.bytes"].value == str(1 << 30) and described["segment.bytes"].is_default
    )
    assert described["cleanup.policy"].is_default and described["cleanup.policy"].value == "delete"


def test_an_unknown_topic_and_a_broker_resource_are_refused_by_code(
    kafka_server: Any, raw: Any
) -> None:
    topic = kafka_server.topic()
    Resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        resources=[
            Resource(
                resource_type=TOPIC_TYPE, resource_name=topic, configuration_keys=["retention.ms"]
            ),
            Resource(resource_type=TOPIC_TYPE, resource_name="absent", configuration_keys=None),
            Resource(resource_type=BROKER_TYPE, resource_name="0", configuration_keys=None),
        ],
        include_synonyms=False,
    )
    answer = raw.call(request, DescribeConfigsResponse, 1)
    chosen, absent, broker = answer.results
    assert chosen.error_code == NONE and [c.name for c in chosen.configs] == ["retention.ms"]
    assert absent.error_code == UNKNOWN_TOPIC_OR_PARTITION and not absent.configs
    assert broker.error_code == INVALID_REQUEST and "only topics" in broker.error_message
