"""LogConfig: defaults, validation that names the key, and Kafka-style keys."""

from __future__ import annotations

import pytest

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.log import LogConfig
from twinlog.engine.log.config import KAFKA_KEYS


def test_defaults_are_the_documented_ones() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1 << 30
    assert config.segment_ms == 7 * 24 * 3600 * 1000
    assert config.index_interval_bytes == 4096
    assert config.retention_bytes == -1
    assert config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.flush_policy == "every_append"
    assert config.batch_bytes_max == 8 << 20


@pytest.mark.parametrize(
    ("field", "value", "message"),  # message None: taken
    [
        ("segment_bytes", 10, r"segment_bytes \(segment.bytes\) is 10, expected 61\.\."),
        ("segment_bytes", 1 << 31, "segment_bytes"),
        ("segment_ms", 0, "segment_ms"),
        ("index_interval_bytes", -1, "index_interval_bytes"),
        ("retention_bytes", -2, r"retention_bytes .* or -1 \(unlimited\)"),
        ("retention_ms", -5, "retention_ms"),
        ("flush_interval_ms", -1, "flush_interval_ms"),
        ("batch_bytes_max", 1 << 31, r"batch_bytes_max \(max.message.bytes\)"),
        ("segment_bytes", True, r"segment_bytes \(segment.bytes\) is True, expected an integer 61"),
        ("segment_bytes", "1024", "is '1024', expected an integer"),
        ("segment_bytes", 61, None),
        ("segment_bytes", (1 << 31) - 1, None),
        ("segment_ms", 1, None),
        ("flush_interval_bytes", -1, r"flush_interval_bytes \(flush.bytes\) is -1, expected 0\.\."),
        ("min_compaction_lag_ms", -1, "min_compaction_lag_ms"),
        ("delete_retention_ms", -1, "delete_retention_ms"),
        ("cleanup_policy", "shred", "cleanup_policy .* one of delete, compact, compact,delete"),
        ("min_cleanable_dirty_ratio", -0.1, r"is -0\.1, expected a number 0\.\.1"),
        ("flush_policy", "sometimes", "flush_policy .* every_append, interval"),
    ],
)
def test_bad_values_name_the_key(field: str, value: object, message: str | None) -> None:
    if message is None:  # an edge of the range: taken
        assert getattr(LogConfig(**{field: value}), field) == value  # type: ignore[arg-type]
        return
    with pytest.raises(InvalidConfigError, match=message) as refused:
        LogConfig(**{field: value})  # type: ignore[arg-type]
    assert "\n" not in str(refused.value)


def test_unlimited_retention_is_allowed() -> None:
    config = LogConfig(retention_bytes=-1, retention_ms=-1)
    assert config.retention_bytes == config.retention_ms == -1


def test_from_mapping_accepts_kafka_keys_and_strings() -> None:
    config = LogConfig.from_mapping(
        {
            "segment.bytes": "1048576",
            "segment.ms": 60_000,
            "index.interval.bytes": "128",
            "retention.bytes": "-1",
            "retention.ms": "3600000",
            "flush.policy": "interval",
            "flush.ms": "50",
            "flush.bytes": 4096,
            "max.message.bytes": "65536",
        }
    )
    assert config == LogConfig(
        segment_bytes=1 << 20,
        segment_ms=60_000,
        index_interval_bytes=128,
        retention_bytes=-1,
        retention_ms=3_600_000,
        flush_policy="interval",
        flush_interval_ms=50,
        flush_interval_bytes=4096,
        batch_bytes_max=65536,
    )


def test_from_mapping_accepts_field_names_and_broker_names() -> None:
    config = LogConfig.from_mapping({"segment_bytes": 4096, "log.retention.ms": "-1"})
    assert (config.segment_bytes, config.retention_ms) == (4096, -1)


def test_every_kafka_key_maps_to_a_field() -> None:
    fields = set(LogConfig.__dataclass_fields__)
    assert set(KAFKA_KEYS.values()) <= fields
    assert fields <= set(KAFKA_KEYS.values())  # every field has a Kafka-style spelling


def test_later_key_wins_so_topic_config_overrides_defaults() -> None:
    defaults = {"segment_bytes": 1 << 30}
    topic = {"segment.bytes": "2048"}
    assert LogConfig.from_mapping({**defaults, **topic}).segment_bytes == 2048


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        (
            {"segment.megabytes": "1"},
            r"unknown log config key 'segment.megabytes' \(did you mean segment.bytes.*\); known keys",
        ),
        ({"flush.messages": "1"}, "flush.messages.*use flush.bytes"),
        (
            {"segment.bytes": "lots"},
            r"segment_bytes \(segment.bytes\) is 'lots', expected an integer 61\.\.",
        ),
        ({"retention.ms": "-7"}, "retention_ms"),
    ],
)
def test_from_mapping_errors_name_the_key(mapping: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        LogConfig.from_mapping(mapping)


def test_config_is_frozen() -> None:
    with pytest.raises(AttributeError):
        LogConfig().segment_bytes = 5  # type: ignore[misc]
