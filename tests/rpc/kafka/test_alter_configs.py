"""IncrementalAlterConfigs and AlterConfigs of topics, as ``kafka-configs.sh --alter`` and
admin clients send them: set and delete live, validate_only changes nothing, a bad
setting is refused naming it, and AlterConfigs replaces the whole set."""

from __future__ import annotations

from typing import Any

from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

from twinlog.rpc.kafka.error_codes import INVALID_CONFIG, INVALID_REQUEST, NONE

Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
Entry = Resource.AlterableConfig
SET, DELETE = 0, 1


def _incremental(raw: Any, resources: list[Any], validate_only: bool = False) -> list[Any]:
    answer = raw.call(
        IncrementalAlterConfigsRequest(resources=resources, validate_only=validate_only),
        IncrementalAlterConfigsResponse,
        1,
    )
    return list(answer.responses)


def test_kafka_python_sets_and_deletes_a_topic_setting(kafka_server: Any) -> None:
    topic = kafka_server.topic()
    client = KafkaAdminClient(bootstrap_servers=kafka_server.bootstrap, request_timeout_ms=10_000)
    try:
        client.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "3600000"})],
            raise_on_unknown=False,
        )
        assert kafka_server.broker.describe_topic(topic).config == {"retention.ms": "3600000"}
        client.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": ("DELETE", None)})],
            raise_on_unknown=False,
        )
    finally:
        client.close()
    assert kafka_server.broker.describe_topic(topic).config == {}


def test_validate_only_bad_settings_and_other_resources(kafka_server: Any, raw: Any) -> None:
    topic = kafka_server.topic()
    checked = _incremental(
        raw,
        [Resource(resource_type=2, resource_name=topic,
                  configs=[Entry(name="segment.bytes", config_operation=SET, value="65536")])],
        validate_only=True,
    )  # fmt: skip
    assert [r.error_code for r in checked] == [NONE]
    assert kafka_server.broker.describe_topic(topic).config == {}
    bad = _incremental(
        raw,
        [
            Resource(resource_type=2, resource_name=topic,
                     configs=[Entry(name="retention.ms", config_operation=SET, value="-7")]),
            Resource(resource_type=2, resource_name=topic,
                     configs=[Entry(name="cleanup.policy", config_operation=2, value="compact")]),
            Resource(resource_type=4, resource_name="1", configs=[]),
        ],
    )  # fmt: skip
    assert [r.error_code for r in bad] == [INVALID_CONFIG, INVALID_CONFIG, INVALID_REQUEST]
    assert "retention_ms" in bad[0].error_message and "APPEND or SUBTRACT" in bad[1].error_message
    assert kafka_server.broker.describe_topic(topic).config == {}


def test_alter_configs_replaces_the_whole_set(kafka_server: Any, raw: Any) -> None:
    topic = kafka_server.topic()
    kafka_server.broker.alter_topic_config(topic, {"retention.ms": "60000"})
    whole = AlterConfigsRequest.AlterConfigsResource
    answer = raw.call(
        AlterConfigsRequest(
            resources=[
                whole(resource_type=2, resource_name=topic,
                      configs=[whole.AlterableConfig(name="segment.bytes", value="1048576")])
            ],
            validate_only=False,
        ),
        AlterConfigsResponse,
        1,
    )  # fmt: skip
    assert [r.error_code for r in answer.responses] == [NONE]
    # retention.ms was not given: back to the broker's default, as Kafka's AlterConfigs
    # (kafka-python fills the others in itself before sending one)
    assert kafka_server.broker.describe_topic(topic).config == {"segment.bytes": "1048576"}
