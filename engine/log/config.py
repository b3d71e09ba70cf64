"""Configuration of one data log (one partition), with units in every name.

``LogConfig`` is frozen and validated on construction: a bad value raises
``InvalidConfigError`` naming the field (and its Kafka-style key). Topic
configuration arrives as a mapping of strings, as Kafka's does, so
``LogConfig.from_mapping`` accepts either the field names or these keys:

    field                  Kafka-style keys accepted             default
    segment_bytes          segment.bytes, log.segment.bytes      1 GiB
    segment_ms             segment.ms, log.roll.ms               7 days
    index_interval_bytes   index.interval.bytes,                 4096
                           log.index.interval.bytes
    retention_bytes        retention.bytes, log.retention.bytes  -1 (unlimited)
    retention_ms           retention.ms, log.retention.ms        7 days (-1 unlimited)
    flush_policy           flush.policy (twinlog's own)          "every_append"
    flush_interval_ms      flush.ms, log.flush.interval.ms       1000
    flush_interval_bytes   flush.bytes (twinlog's own)           1 MiB
    max_batch_bytes        max.message.bytes, message.max.bytes  8 MiB

Kafka's ``flush.messages`` counts records, not bytes, and is refused with a
hint to use ``flush.bytes``. Values may be ints or decimal strings. When two
keys name the same field, the later one in the mapping wins, so
``from_mapping({**defaults, **topic_config})`` lets the topic override.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from engine.batch_format import BATCH_BYTES_HARD_MAX, HEADER_BYTES
from engine.errors import InvalidConfigError

MEBIBYTE = 1 << 20
DAY_MS = 24 * 60 * 60 * 1000
UNLIMITED = -1

FLUSH_EVERY_APPEND = "every_append"
FLUSH_INTERVAL = "interval"
FLUSH_POLICIES = (FLUSH_EVERY_APPEND, FLUSH_INTERVAL)

# Index entries store positions as u32, and a segment never grows past
# max(segment_bytes, one batch), so both limits keep every position < 2**32.
SEGMENT_BYTES_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1

KAFKA_KEYS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "log.segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "log.roll.ms": "segment_ms",
    "index.interval.bytes": "index_interval_bytes",
    "log.index.interval.bytes": "index_interval_bytes",
    "retention.bytes": "retention_bytes",
    "log.retention.bytes": "retention_bytes",
    "retention.ms": "retention_ms",
    "log.retention.ms": "retention_ms",
    "flush.policy": "flush_policy",
    "flush.ms": "flush_interval_ms",
    "log.flush.interval.ms": "flush_interval_ms",
    "flush.bytes": "flush_interval_bytes",
    "max.message.bytes": "max_batch_bytes",
    "message.max.bytes": "max_batch_bytes",
}
REFUSED_KAFKA_KEYS: dict[str, str] = {
    "flush.messages": "twinlog flushes by bytes, not records: use flush.bytes",
    "log.flush.interval.messages": "twinlog flushes by bytes, not records: use flush.bytes",
}

# field -> (smallest, largest, allow UNLIMITED)
_INTEGER_RANGES: dict[str, tuple[int, int, bool]] = {
    "segment_bytes": (HEADER_BYTES, SEGMENT_BYTES_MAX, False),
    "segment_ms": (1, INT64_MAX, False),
    "index_interval_bytes": (0, SEGMENT_BYTES_MAX, False),
    "retention_bytes": (0, INT64_MAX, True),
    "retention_ms": (0, INT64_MAX, True),
    "flush_interval_ms": (0, INT64_MAX, False),
    "flush_interval_bytes": (0, INT64_MAX, False),
    "max_batch_bytes": (HEADER_BYTES, BATCH_BYTES_HARD_MAX, False),
}


def _key_names(field: str) -> str:
    """'segment_bytes (segment.bytes)': how a message names a field."""
    aliases = [key for key, target in KAFKA_KEYS.items() if target == field]
    return f"{field} ({aliases[0]})" if aliases else field


@dataclass(frozen=True)
class LogConfig:
    """Settings of one data log. Immutable; share freely between threads."""

    segment_bytes: int = 1 << 30  # roll when the active segment would pass this size
    segment_ms: int = 7 * DAY_MS  # roll when a batch is this much newer than the segment's first
    index_interval_bytes: int = 4096  # bytes of batches between two sparse index entries
    retention_bytes: int = UNLIMITED  # delete old segments while the log stays at least this big
    retention_ms: int = 7 * DAY_MS  # delete segments whose newest timestamp is older than this
    flush_policy: str = FLUSH_EVERY_APPEND  # "every_append" or "interval"
    flush_interval_ms: int = 1000  # "interval": fsync when the last fsync is this old
    flush_interval_bytes: int = MEBIBYTE  # "interval": fsync when this much is unflushed
    max_batch_bytes: int = 8 * MEBIBYTE  # larger batches are refused (BatchTooLargeError)

    def __post_init__(self) -> None:
        for field, (smallest, largest, allow_unlimited) in _INTEGER_RANGES.items():
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidConfigError(
                    f"log config {_key_names(field)} must be an integer, got {value!r}"
                )
            if allow_unlimited and value == UNLIMITED:
                continue
            if not smallest <= value <= largest:
                unlimited = " or -1 (unlimited)" if allow_unlimited else ""
                raise InvalidConfigError(
                    f"log config {_key_names(field)} is {value}, expected "
                    f"{smallest}..{largest}{unlimited}"
                )
        if self.flush_policy not in FLUSH_POLICIES:
            raise InvalidConfigError(
                f"log config {_key_names('flush_policy')} is {self.flush_policy!r}, "
                f"expected one of {', '.join(FLUSH_POLICIES)}"
            )

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, object]) -> LogConfig:
        """A config from field names or Kafka-style keys; unset fields keep their defaults."""
        fields = {field.name: field for field in dataclasses.fields(cls)}
        values: dict[str, object] = {}
        for key, raw_value in mapping.items():
            if key in REFUSED_KAFKA_KEYS:
                raise InvalidConfigError(
                    f"log config key {key!r} is not supported: {REFUSED_KAFKA_KEYS[key]}"
                )
            field = KAFKA_KEYS.get(key, key)
            if field not in fields:
                known = sorted([*fields, *KAFKA_KEYS])
                raise InvalidConfigError(
                    f"unknown log config key {key!r}; known keys: {', '.join(known)}"
                )
            values[field] = _parse_value(field, raw_value)
        return cls(**values)  # type: ignore[arg-type]  # each value was parsed for its field


def _parse_value(field: str, raw_value: object) -> object:
    if field == "flush_policy" or not isinstance(raw_value, str):
        return raw_value  # types are checked by __post_init__
    try:
        return int(raw_value.strip())
    except ValueError:
        raise InvalidConfigError(
            f"log config {_key_names(field)} must be an integer, got {raw_value!r}"
        ) from None
