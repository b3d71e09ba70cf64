"""CreateTopics judges topic settings as Kafka does: an unknown key or a bad value is
INVALID_CONFIG naming the key; compression.type is taken as "producer" (batches are stored
as written), another codec refused rather than accepted and not done."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from twinlog.rpc.kafka.error_codes import INVALID_CONFIG, NONE


def test_create_topics_settings_are_judged_as_kafka_judges_them(
    raw: Any, kafka_server: Any
) -> None:
    def create(name: str, key: str, value: str) -> Any:
        config = CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=key, value=value)
        creatable = CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=1, replication_factor=-1, assignments=[], configs=[config]
        )
        request = CreateTopicsRequest(topics=[creatable], timeout_ms=5000, validate_only=False)
        return raw.call(request, CreateTopicsResponse, 5).topics[0]

    topic = kafka_server.topic()
    assert create(f"{topic}-producer", "compression.type", "producer").error_code == NONE
    # stored as written, never recompressed: another codec is refused, not ignored
    gzip = create(f"{topic}-gzip", "compression.type", "gzip")
    assert gzip.error_code == INVALID_CONFIG
    assert "compression.type" in gzip.error_message
    unknown = create(f"{topic}-unknown", "no.such.setting", "1")
    assert unknown.error_code == INVALID_CONFIG
    assert "no.such.setting" in unknown.error_message
    bad = create(f"{topic}-bad", "retention.ms", "soon")
    assert bad.error_code == INVALID_CONFIG
    assert "retention.ms" in bad.error_message
