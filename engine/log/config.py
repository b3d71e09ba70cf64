"""Configuration of one data log (one partition), with units in every name.

``LogConfig`` is frozen and checked on construction by its rules (``RULES``,
``engine/base/config_rules.py``): a bad value raises an ``InvalidConfigError`` of one
line naming the field (and its Kafka-style key), the value and what is allowed. Topic
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
    min_insync_replicas    min.insync.replicas                   1 (a broker gives its own)
    compression_type       compression.type                      "producer"

``min_insync_replicas`` is not the log's but the partition's (a leader refuses writes while
fewer replicas are in sync: ``ReplicaSet``); it is a topic setting as Kafka's, so it lives
with the others and changes live the same way.

``compression_type`` is Kafka's setting of the codec a broker stores batches in. twinlog
stores every batch as its producer wrote it (whatever its codec) and never recompresses, so
only Kafka's ``producer`` (its default) is taken; another codec is refused with a line
saying so, rather than accepted and not done.

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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from twinlog.engine.base.config_rules import ConfigRules, Integer, Number, OneOf
from twinlog.engine.base.errors import BatchTooLargeError, InvalidConfigError
from twinlog.engine.base.units import GIBIBYTE, MEBIBYTE
from twinlog.engine.records.batch_format import BATCH_BYTES_HARD_MAX, HEADER_BYTES

# One produced batch at most, unless configured: the one default of the broker's
# batch_bytes_max (Kafka's message.max.bytes), every topic's max.message.bytes, the
# producer's batch_bytes_max and the Spark sink's batch limit.
BATCH_BYTES_MAX_DEFAULT = 8 * MEBIBYTE

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
    "min.insync.replicas": "min_insync_replicas",
    "compression.type": "compression_type",
}
# A topic's own settings under the names Kafka gives them per topic (DescribeConfigs): the
# keys above but the broker-wide "log." names and message.max.bytes.
TOPIC_KEYS: dict[str, str] = {
    kafka: field
    for kafka, field in KAFKA_KEYS.items()
    if not kafka.startswith("log.") and kafka != "message.max.bytes"
}

# Kafka's compression.type "producer": batches kept in the codec their producer chose.
COMPRESSION_AS_PRODUCED = "producer"


@dataclass(frozen=True)
class _StoredAsWritten(OneOf):
    """compression.type: only "producer", with the reason in the refusal."""

    def allowed(self, value: object) -> str:
        return (
            f"{COMPRESSION_AS_PRODUCED} (twinlog stores each batch in the codec its producer "
            "wrote, any of none, gzip, snappy, lz4, zstd, and does not recompress to another)"
        )


REFUSED_KAFKA_KEYS: dict[str, str] = {
    "flush.messages": "twinlog flushes by bytes, not records: use flush.bytes",
    "log.flush.interval.messages": "twinlog flushes by bytes, not records: use flush.bytes",
}

RULES = ConfigRules(
    "log config",
    {
        "segment_bytes": Integer(HEADER_BYTES, SEGMENT_BYTES_MAX),
        "segment_ms": Integer(1, INT64_MAX),
        "index_interval_bytes": Integer(0, SEGMENT_BYTES_MAX),
        "retention_bytes": Integer(0, INT64_MAX, minus_one="unlimited"),
        "retention_ms": Integer(0, INT64_MAX, minus_one="unlimited"),
        "flush_policy": OneOf(FLUSH_POLICIES),
        "flush_interval_ms": Integer(0, INT64_MAX),
        "flush_interval_bytes": Integer(0, INT64_MAX),
        "batch_bytes_max": Integer(HEADER_BYTES, BATCH_BYTES_HARD_MAX),
        "cleanup_policy": OneOf(CLEANUP_POLICIES),
        "min_compaction_lag_ms": Integer(0, INT64_MAX),
        "min_cleanable_dirty_ratio": Number(0, 1),
        "delete_retention_ms": Integer(0, INT64_MAX),
        "min_insync_replicas": Integer(1, 1000),
        "compression_type": _StoredAsWritten((COMPRESSION_AS_PRODUCED,)),
    },
    aliases=KAFKA_KEYS,
    refused_keys=REFUSED_KAFKA_KEYS,
)


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
    batch_bytes_max: int = BATCH_BYTES_MAX_DEFAULT
    cleanup_policy: str = CLEANUP_DELETE  # "delete", "compact" or "compact,delete"
    min_compaction_lag_ms: int = 0  # a sealed segment newer than this is not compacted yet
    min_cleanable_dirty_ratio: float = 0.5  # compact when dirty bytes / cleanable bytes >= this
    delete_retention_ms: int = DAY_MS  # a tombstone (null value) is kept this long, then dropped
    # in-sync replicas a leader needs to take a write (a topic that does not set it takes
    # the broker's min_insync_replicas; 1 on a single node)
    min_insync_replicas: int = 1
    compression_type: str = COMPRESSION_AS_PRODUCED  # batches are stored as written

    def __post_init__(self) -> None:
        # Frozen: normalise through object.__setattr__ ("delete, compact" -> "compact,delete").
        object.__setattr__(self, "cleanup_policy", _normal_cleanup_policy(self.cleanup_policy))
        RULES.check(self)

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
        return cls(**RULES.values_from(mapping))


def _normal_cleanup_policy(policy: object) -> object:
    """One spelling of each policy ("delete, compact" -> "compact,delete"); anything else
    as it is, for the rules to refuse."""
    words = policy.split(",") if isinstance(policy, str) else []
    chosen = {word.strip() for word in words}
    if not words or not chosen <= {CLEANUP_DELETE, CLEANUP_COMPACT}:
        return policy
    if chosen == {CLEANUP_DELETE, CLEANUP_COMPACT}:
        return CLEANUP_COMPACT_DELETE
    return chosen.pop()


def topic_settings(config: LogConfig, given: Mapping[str, object]) -> list[tuple[str, str, bool]]:
    """(name, value, set on the topic) of every topic setting of ``config``, under Kafka's
    topic-level names (``TOPIC_KEYS``); ``given``: the settings the topic was created with,
    in any spelling (the others are the broker's defaults)."""
    set_fields = {KAFKA_KEYS.get(key, key) for key in given}
    return [
        (kafka, str(getattr(config, field)), field in set_fields)
        for kafka, field in TOPIC_KEYS.items()
    ]


def altered_topic_config(
    current: Mapping[str, str], set_values: Mapping[str, str], deleted: Iterable[str]
) -> dict[str, str]:
    """A topic's settings after an alter (Kafka's IncrementalAlterConfigs SET and DELETE):
    ``current`` with every key of ``deleted`` and of ``set_values`` removed in whatever
    spelling it has there (``retention.ms`` and ``retention_ms`` are one setting), then
    ``set_values`` added. A deleted setting falls back to the broker's default.
    InvalidConfigError for a name that is no topic setting (values are checked when the
    result is made a ``LogConfig``)."""
    touched: set[str] = set()
    for key in [*set_values, *deleted]:
        field = KAFKA_KEYS.get(key, key)
        if field not in RULES.rules:
            why = REFUSED_KAFKA_KEYS.get(key, f"topic settings are {', '.join(TOPIC_KEYS)}")
            raise InvalidConfigError(f"{key!r} is not a topic setting; {why}")
        touched.add(field)
    kept = {key: value for key, value in current.items() if KAFKA_KEYS.get(key, key) not in touched}
    return {**kept, **{str(key): str(value) for key, value in set_values.items()}}
