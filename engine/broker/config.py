"""Broker configuration: every key, its default and its unit, in one table.

``Broker.open(data_dir, **config)`` and ``twinlog serve --config key=value``
take these keys; Kafka-style dotted names (``transaction.timeout.ms``) are
accepted too. Per-topic settings (segment size, retention, flush policy) live
in ``twinlog.engine.log.LogConfig``; the ``log_*`` keys here are the defaults for new
topics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.base.renamed_keys import canonical_key
from twinlog.engine.records.batch_format import BATCH_BYTES_HARD_MAX, HEADER_BYTES


@dataclass(frozen=True)
class BrokerConfig:
    # Transaction coordinator
    journal_partitions: int = 4  # transaction journal partitions; fixed once a data dir exists
    transaction_timeout_ms_default: int = 60_000  # Kafka's transaction.timeout.ms
    transaction_timeout_ms_max: int = 15 * 60_000  # Kafka's transaction.max.timeout.ms
    transaction_check_interval_ms: int = 1_000  # how often timed-out transactions are aborted
    checkpoint_interval_ms: int = 10_000  # how often coordinator checkpoints are written
    open_transactions_max: int = 100_000  # in flight across the broker
    # Consumer group offsets
    offsets_partitions: int = 4  # partitions of __consumer_offsets
    # its segment size when it is created (Kafka's offsets.topic.segment.bytes); it is
    # compacted, which touches sealed segments only
    offsets_segment_bytes: int = 100 * 1024 * 1024
    # Consumer group membership (engine/groups): the interval a member heartbeats at while
    # its group is stable (Kafka's group.consumer.heartbeat.interval.ms is 5 s; 3 s, the
    # classic consumer's, makes a member that joins or leaves settle sooner), and how often
    # members past their session or rebalance timeout are removed
    group_heartbeat_interval_ms: int = 3_000
    group_session_check_interval_ms: int = 250
    # Local data journal (LMDB)
    journal_map_bytes_initial: int = 256 * 1024 * 1024  # grows when full
    # How LMDB (the local data journal's view) syncs: "journal_log" leaves durability to the
    # partitions' journal logs (journal/local_config.py has the modes and their trade-offs).
    journal_sync_mode: str = "journal_log"
    # Where a journaled batch's bytes live: "journal_log" only there (LMDB names the record:
    # every journaled byte written once), "lmdb" also in LMDB (the layout before; for
    # measuring one against the other). Both are always read, so it may change at a restart.
    journal_entry_batches: str = "journal_log"
    # After the journal was lost (moved aside, no backup): complete committed transactions
    # whose batches it held as empty, instead of refusing (docs/formats.md, "Damage").
    # Their records on this broker are gone; only for starting again after such a loss.
    accept_journal_loss: bool = False
    # Limits on produce
    # One produced batch, Kafka's message.max.bytes: the default of every topic's limit,
    # which a topic may set for itself (max.message.bytes, in LogConfig). Broker.produce
    # checks each batch against its topic's limit; ``twinlog serve --config
    # batch_bytes_max=...`` sets this one value (the server has no limit of its own).
    batch_bytes_max: int = 8 * 1024 * 1024
    # Records in one produced batch: each costs every reader ~6 us and ~85 bytes, so a
    # 1 KiB batch of two million empty records would cost each consumer 12 s. A 1 MiB
    # batch (the Spark sink's) of the smallest records holds ~150,000.
    batch_records_max: int = 262_144
    # A produced batch's records section, decompressed (a zstd "bomb" of 8 KiB may declare
    # 256 MiB): refused from its frame header before anything is decompressed.
    batch_decompressed_bytes_max: int = 32 * 1024 * 1024
    # Decompressed sections held at once by all produce requests together (memory per
    # broker); a request past it waits a little, then is refused as retriable.
    decompressed_bytes_in_flight_max: int = 128 * 1024 * 1024
    # Defaults for new topics (see twinlog.engine.log.LogConfig)
    log_segment_bytes: int = 1024 * 1024 * 1024
    log_retention_ms: int = 7 * 24 * 3600 * 1000
    log_retention_bytes: int = -1
    log_flush_policy: str = "every_append"
    # Replication, on a cluster broker (engine/replication/replication_settings.py has
    # the reasons for these defaults, Kafka's)
    default_replication_factor: int = 3  # a new topic's on a cluster (CLUSTER.md §3.9)
    min_insync_replicas: int = 2
    replica_lag_time_max_ms: int = 30_000
    replica_ack_timeout_ms: int = 30_000
    replica_fsync: bool = True
    retention_check_interval_ms: int = 60_000
    compaction_check_interval_ms: int = 15_000  # compacted topics (Kafka's log.cleaner.backoff.ms)

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if item.type in ("int", int) and (
                not isinstance(value, int) or isinstance(value, bool)
            ):
                raise InvalidConfigError(f"config {item.name} must be an integer, got {value!r}")
        if not 1 <= self.journal_partitions <= 256:
            raise InvalidConfigError(
                f"config journal_partitions is {self.journal_partitions}; use 1..256"
            )
        if not 1 <= self.offsets_partitions <= 1024:
            raise InvalidConfigError(
                f"config offsets_partitions is {self.offsets_partitions}; use 1..1024"
            )
        if not 0 < self.transaction_timeout_ms_default <= self.transaction_timeout_ms_max:
            raise InvalidConfigError(
                "config transaction_timeout_ms_default must be > 0 and <= "
                f"transaction_timeout_ms_max ({self.transaction_timeout_ms_max})"
            )
        for name in (
            "transaction_check_interval_ms",
            "checkpoint_interval_ms",
            "retention_check_interval_ms",
            "compaction_check_interval_ms",
            "offsets_segment_bytes",
            "group_heartbeat_interval_ms",
            "group_session_check_interval_ms",
            "open_transactions_max",
            "batch_records_max",
            "batch_decompressed_bytes_max",
            "min_insync_replicas",
            "default_replication_factor",
            "replica_lag_time_max_ms",
            "replica_ack_timeout_ms",
        ):
            if getattr(self, name) <= 0:
                raise InvalidConfigError(f"config {name} must be > 0")
        if not HEADER_BYTES <= self.batch_bytes_max <= BATCH_BYTES_HARD_MAX:
            raise InvalidConfigError(
                f"config batch_bytes_max (message.max.bytes) is {self.batch_bytes_max}, "
                f"expected {HEADER_BYTES}..{BATCH_BYTES_HARD_MAX}, as a topic's max.message.bytes"
            )
        if self.decompressed_bytes_in_flight_max < self.batch_decompressed_bytes_max:
            raise InvalidConfigError(
                f"config decompressed_bytes_in_flight_max "
                f"({self.decompressed_bytes_in_flight_max}) is below "
                f"batch_decompressed_bytes_max ({self.batch_decompressed_bytes_max}): one "
                "batch must fit"
            )
        if self.log_flush_policy not in ("every_append", "interval"):
            raise InvalidConfigError(
                f"config log_flush_policy is {self.log_flush_policy!r}; use every_append or interval"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> BrokerConfig:
        """Build from keys as given by a user: underscores or dots, values as str or int."""
        known = {item.name: item for item in fields(cls)}
        parsed: dict[str, Any] = {}
        for raw_key, raw_value in values.items():
            key = canonical_key(raw_key.replace(".", "_").replace("-", "_"))
            if key not in known:
                raise InvalidConfigError(
                    f"unknown broker config key {raw_key!r}; known keys: {', '.join(sorted(known))}"
                )
            if known[key].type in ("bool", bool) and isinstance(raw_value, str):
                if raw_value.lower() not in ("true", "false"):
                    raise InvalidConfigError(
                        f"config {raw_key} must be true or false, got {raw_value!r}"
                    )
                raw_value = raw_value.lower() == "true"
            if known[key].type in ("int", int) and isinstance(raw_value, str):
                try:
                    raw_value = int(raw_value)
                except ValueError:
                    raise InvalidConfigError(
                        f"config {raw_key} must be an integer, got {raw_value!r}"
                    ) from None
            parsed[key] = raw_value
        return cls(**parsed)
