"""Broker configuration: every key, its default and its unit, in one table.

``Broker.open(data_dir, **config)`` and ``twinlog serve --config key=value``
take these keys; Kafka-style dotted names (``transaction.timeout.ms``) are
accepted too. Per-topic settings (segment size, retention, flush policy) live
in ``twinlog.engine.log.LogConfig``; the ``log_*`` keys here are the defaults for new
topics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from twinlog.engine.base.config_rules import POSITIVE, ConfigRules, Flag, Integer, OneOf
from twinlog.engine.base.units import GIBIBYTE, MEBIBYTE
from twinlog.engine.broker.group_offsets import STORED_METADATA_BYTES_MAX
from twinlog.engine.broker.topic_registry import PARTITIONS_MAX
from twinlog.engine.log.config import BATCH_BYTES_MAX_DEFAULT
from twinlog.engine.log.config import RULES as LOG_RULES
from twinlog.engine.records.batch_format import BATCH_BYTES_HARD_MAX, HEADER_BYTES
from twinlog.journal.local_config import ENTRY_BATCHES, MAP_SIZE_BYTES_MIN, SYNC_MODES


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
    offsets_segment_bytes: int = 100 * MEBIBYTE
    # the longest metadata string an offset commit may carry (Kafka's
    # offset.metadata.max.bytes): a longer one is refused for its partition
    offset_metadata_max_bytes: int = 4096
    # Consumer group membership (engine/groups): the interval a member heartbeats at while
    # its group is stable (Kafka's group.consumer.heartbeat.interval.ms is 5 s; 3 s, the
    # classic consumer's, makes a member that joins or leaves settle sooner), and how often
    # members past their session or rebalance timeout are removed
    group_heartbeat_interval_ms: int = 3_000
    group_session_check_interval_ms: int = 250
    # Local data journal (LMDB)
    journal_map_bytes_initial: int = 256 * MEBIBYTE  # grows when full
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
    batch_bytes_max: int = BATCH_BYTES_MAX_DEFAULT
    # Records in one produced batch: each costs every reader ~6 us and ~85 bytes, so a
    # 1 KiB batch of two million empty records would cost each consumer 12 s. A 1 MiB
    # batch (the Spark sink's) of the smallest records holds ~150,000.
    batch_records_max: int = 262_144
    # A produced batch's records section, decompressed (a zstd "bomb" of 8 KiB may declare
    # 256 MiB): refused from its frame header before anything is decompressed.
    batch_decompressed_bytes_max: int = 32 * MEBIBYTE
    # Decompressed sections held at once by all produce requests together (memory per
    # broker); a request past it waits a little, then is refused as retriable.
    decompressed_bytes_in_flight_max: int = 128 * MEBIBYTE
    # Defaults for new topics (see twinlog.engine.log.LogConfig)
    log_segment_bytes: int = GIBIBYTE
    log_retention_ms: int = 7 * 24 * 3600 * 1000
    log_retention_bytes: int = -1
    log_flush_policy: str = "every_append"
    # Topics created on first use (Kafka's auto.create.topics.enable and num.partitions): a
    # producer sending to a topic that does not exist gets it created, with num_partitions
    # partitions and default_replication_factor replicas, when its principal may CREATE it.
    # Consumers never create a topic; internal ones (__*) are never created this way.
    auto_create_topics_enable: bool = True
    num_partitions: int = 1
    # Replication, on a cluster broker (engine/replication/replication_settings.py has
    # the reasons for these defaults, Kafka's)
    default_replication_factor: int = 3  # a new topic's on a cluster (CLUSTER.md §3.9)
    min_insync_replicas: int = 2
    replica_lag_time_max_ms: int = 30_000
    replica_ack_timeout_ms: int = 30_000
    replica_fsync: bool = True
    # How often each partition's high watermark is checkpointed (Kafka's
    # replica.high.watermark.checkpoint.interval.ms): a restarted replica serves up to it
    replica_high_watermark_checkpoint_interval_ms: int = 5_000
    retention_check_interval_ms: int = 60_000
    compaction_check_interval_ms: int = 15_000  # compacted topics (Kafka's log.cleaner.backoff.ms)
    # Preferred leaders, on a cluster (Kafka's auto.leader.rebalance.enable,
    # leader.imbalance.per.broker.percentage, leader.imbalance.check.interval.seconds): the
    # controller moves leadership back to each partition's first replica once a broker
    # leads fewer than (100 - percentage) % of the partitions it is the preferred leader of
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_ms: int = 300_000

    def __post_init__(self) -> None:
        RULES.check(self)
        if self.transaction_timeout_ms_default > self.transaction_timeout_ms_max:
            raise RULES.refuse(
                "transaction_timeout_ms_default",
                self.transaction_timeout_ms_default,
                f"at most transaction_timeout_ms_max ({self.transaction_timeout_ms_max})",
            )
        if self.decompressed_bytes_in_flight_max < self.batch_decompressed_bytes_max:
            raise RULES.refuse(
                "decompressed_bytes_in_flight_max",
                self.decompressed_bytes_in_flight_max,
                f"at least batch_decompressed_bytes_max ({self.batch_decompressed_bytes_max}): "
                "one batch must fit",
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> BrokerConfig:
        """Build from keys as given by a user: underscores or dots, values as str or int."""
        return cls(**RULES.values_from(values))


RULES = ConfigRules(
    "broker config",
    {
        "journal_partitions": Integer(1, 256),
        "transaction_timeout_ms_default": POSITIVE,  # and at most the max, below
        "transaction_timeout_ms_max": POSITIVE,
        "transaction_check_interval_ms": POSITIVE,
        "checkpoint_interval_ms": POSITIVE,
        "open_transactions_max": POSITIVE,
        "offsets_partitions": Integer(1, 1024),
        "offsets_segment_bytes": POSITIVE,
        "offset_metadata_max_bytes": Integer(0, STORED_METADATA_BYTES_MAX),
        "group_heartbeat_interval_ms": POSITIVE,
        "group_session_check_interval_ms": POSITIVE,
        # The journal's own limits, refused here before anything is opened
        "journal_map_bytes_initial": Integer(MAP_SIZE_BYTES_MIN),
        "journal_sync_mode": OneOf(SYNC_MODES),
        "journal_entry_batches": OneOf(ENTRY_BATCHES),
        "accept_journal_loss": Flag(),
        # As a topic's max.message.bytes (LogConfig's batch_bytes_max)
        "batch_bytes_max": Integer(HEADER_BYTES, BATCH_BYTES_HARD_MAX),
        "batch_records_max": POSITIVE,
        "batch_decompressed_bytes_max": POSITIVE,
        "decompressed_bytes_in_flight_max": POSITIVE,  # and room for one batch, below
        # The defaults of new topics take the topics' own rules
        "log_segment_bytes": LOG_RULES.rules["segment_bytes"],
        "log_retention_ms": LOG_RULES.rules["retention_ms"],
        "log_retention_bytes": LOG_RULES.rules["retention_bytes"],
        "log_flush_policy": LOG_RULES.rules["flush_policy"],
        "auto_create_topics_enable": Flag(),
        "num_partitions": Integer(1, PARTITIONS_MAX),
        "default_replication_factor": POSITIVE,
        "min_insync_replicas": POSITIVE,
        "replica_lag_time_max_ms": POSITIVE,
        "replica_ack_timeout_ms": POSITIVE,
        "replica_fsync": Flag(),
        "replica_high_watermark_checkpoint_interval_ms": POSITIVE,
        "retention_check_interval_ms": POSITIVE,
        "compaction_check_interval_ms": POSITIVE,
        "auto_leader_rebalance_enable": Flag(),
        "leader_imbalance_per_broker_percentage": Integer(0, 100),
        "leader_imbalance_check_interval_ms": POSITIVE,
    },
    loose_keys=True,  # Kafka-style dotted names (transaction.timeout.ms) and dashes too
    labels={"batch_bytes_max": "batch_bytes_max (message.max.bytes)"},  # Kafka's name for it
)
