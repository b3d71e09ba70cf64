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
    batch_bytes_max        max.message.bytes, message.max.bytes  8 MiB
    cleanup_policy         cleanup.policy, log.cleanup.policy    "delete"
    min_compaction_lag_ms  min.compaction.lag.ms,                0
                           log.cleaner.min.compaction.lag.ms
    min_cleanable_dirty_ratio  min.cleanable.dirty.ratio,        0.5
                           log.cleaner.min.cleanable.ratio
    delete_retention_ms    delete.retention.ms,                  1 day
                           log.cleaner.delete.retention.ms

``cleanup_policy`` is Kafka's: "delete" (retention deletes old segments),
"compact" (log compaction keeps the latest record per key, see
compaction.py; retention deletes nothing), or both ("compact,delete", in
either order). The other three tune compaction and mean nothing without it.

Kafka's ``flush.messages`` counts records, not bytes, and is refused with a
hint to use ``flush.bytes``. Values may be ints or decimal strings (the
dirty ratio a decimal fraction, such as "0.5"). When two
keys name the same field, the later one in the mapping wins, so
``from_mapping({**defaults, **topic_config})`` lets the topic override.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from twinlog.engine.base.errors import BatchTooLargeError, InvalidConfigError
from twinlog.engine.base.renamed_keys import canonical_key
from twinlog.engine.base.units import GIBIBYTE, MEBIBYTE
from twinlog.engine.records.batch_format import BATCH_BYTES_HARD_MAX, HEADER_BYTES

DAY_MS = 24 * 60 * 60 * 1000
UNLIMITED = -1

FLUSH_EVERY_APPEND = "every_append"
FLUSH_INTERVAL = "interval"
FLUSH_POLICIES = (FLUSH_EVERY_APPEND, FLUSH_INTERVAL)

CLEANUP_DELETE = "delete"
CLEANUP_COMPACT = "compact"
CLEANUP_COMPACT_DELETE = "compact,delete"  # the canonical spelling of both
CLEANUP_POLICIES = (CLEANUP_DELETE, CLEANUP_COMPACT, CLEANUP_COMPACT_DELETE)

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
    "max.message.bytes": "batch_bytes_max",
    "message.max.bytes": "batch_bytes_max",
    "cleanup.policy": "cleanup_policy",
    "log.cleanup.policy": "cleanup_policy",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "log.cleaner.min.compaction.lag.ms": "min_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "log.cleaner.min.cleanable.ratio": "min_cleanable_dirty_ratio",
    "delete.retention.ms": "delete_retention_ms",
    "log.cleaner.delete.retention.ms": "delete_retention_ms",
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
    "batch_bytes_max": (HEADER_BYTES, BATCH_BYTES_HARD_MAX, False),
    "min_compaction_lag_ms": (0, INT64_MAX, False),
    "delete_retention_ms": (0, INT64_MAX, False),
}
_STRING_FIELDS = ("flush_policy", "cleanup_policy")


def _key_names(field: str) -> str:
    """'segment_bytes (segment.bytes)': how a message names a field."""
    aliases = [key for key, target in KAFKA_KEYS.items() if target == field]
    return f"{field} ({aliases[0]})" if aliases else field


@dataclass(frozen=True)
class LogConfig:
    """Settings of one data log. Immutable; share freely between threads."""

    segment_bytes: int = 1 * GIBIBYTE  # roll when the active segment would pass this size
    segment_ms: int = 7 * DAY_MS  # roll when a batch is this much newer than the segment's first
    index_interval_bytes: int = 4096  # bytes of batches between two sparse index entries
    retention_bytes: int = UNLIMITED  # delete old segments while the log stays at least this big
    retention_ms: int = 7 * DAY_MS  # delete segments whose newest timestamp is older than this
    flush_policy: str = FLUSH_EVERY_APPEND  # "every_append" or "interval"
    flush_interval_ms: int = 1000  # "interval": fsync when the last fsync is this old
    flush_interval_bytes: int = MEBIBYTE  # "interval": fsync when this much is unflushed
    # Kafka's max.message.bytes: larger batches are refused (BatchTooLargeError, by
    # check_batch_bytes); a topic that does not set it takes the broker's batch_bytes_max
    batch_bytes_max: int = 8 * MEBIBYTE
    cleanup_policy: str = CLEANUP_DELETE  # "delete", "compact" or "compact,delete"
    min_compaction_lag_ms: int = 0  # a sealed segment newer than this is not compacted yet
    min_cleanable_dirty_ratio: float = 0.5  # compact when dirty bytes / cleanable bytes >= this
    delete_retention_ms: int = DAY_MS  # a tombstone (null value) is kept this long, then dropped

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
        # Frozen: normalise through object.__setattr__ ("delete, compact" -> "compact,delete").
        object.__setattr__(self, "cleanup_policy", _normal_cleanup_policy(self.cleanup_policy))
        ratio = self.min_cleanable_dirty_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0.0 <= ratio <= 1.0:
            raise InvalidConfigError(
                f"log config {_key_names('min_cleanable_dirty_ratio')} is {ratio!r}, "
                "expected a number from 0 to 1"
            )

    @property
    def compacts(self) -> bool:
        """Does log compaction keep only the latest record per key (cleanup.policy compact)?"""
        return self.cleanup_policy in (CLEANUP_COMPACT, CLEANUP_COMPACT_DELETE)

    @property
    def deletes(self) -> bool:
        """Does retention delete old segments (cleanup.policy delete)?"""
        return self.cleanup_policy in (CLEANUP_DELETE, CLEANUP_COMPACT_DELETE)

    def check_batch_bytes(self, size_bytes: int, where: object) -> None:
        """BatchTooLargeError when a batch of ``size_bytes`` is over ``batch_bytes_max``.

        The one rule of a batch's size: ``Broker.produce`` applies it to a producer's batch
        (both doors', plain and transactional) against its topic's log config before
        anything is read or written, and a data log to every batch it is given.
        ``where``: the partition (or log) the batch was for.
        """
        if size_bytes > self.batch_bytes_max:
            raise BatchTooLargeError(
                f"a batch of {size_bytes} bytes for {where} is over its topic's limit of "
                f"{self.batch_bytes_max} bytes: send smaller batches, or raise the topic's "
                "max.message.bytes (the broker's batch_bytes_max, Kafka's message.max.bytes, "
                "for topics that do not set it); the producer's batch_bytes_max (Kafka's "
                "max.request.size) should match the limit, so that it refuses a larger "
                "record before sending"
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
            field = canonical_key(KAFKA_KEYS.get(key, key))
            if field not in fields:
                known = sorted([*fields, *KAFKA_KEYS])
                raise InvalidConfigError(
                    f"unknown log config key {key!r}; known keys: {', '.join(known)}"
                )
            values[field] = _parse_value(field, raw_value)
        return cls(**values)  # type: ignore[arg-type]  # each value was parsed for its field


def _normal_cleanup_policy(policy: object) -> str:
    words = policy.split(",") if isinstance(policy, str) else []
    chosen = {word.strip() for word in words}
    if not words or not chosen <= {CLEANUP_DELETE, CLEANUP_COMPACT}:
        raise InvalidConfigError(
            f"log config {_key_names('cleanup_policy')} is {policy!r}, expected one of "
            f"{', '.join(CLEANUP_POLICIES)}"
        )
    if chosen == {CLEANUP_DELETE, CLEANUP_COMPACT}:
        return CLEANUP_COMPACT_DELETE
    return chosen.pop()


def _parse_value(field: str, raw_value: object) -> object:
    if field in _STRING_FIELDS or not isinstance(raw_value, str):
        return raw_value  # types are checked by __post_init__
    if field == "min_cleanable_dirty_ratio":
        try:
            return float(raw_value.strip())
        except ValueError:
            raise InvalidConfigError(
                f"log config {_key_names(field)} must be a number from 0 to 1, got {raw_value!r}"
            ) from None
    try:
        return int(raw_value.strip())
    except ValueError:
        raise InvalidConfigError(
            f"log config {_key_names(field)} must be an integer, got {raw_value!r}"
        ) from None
