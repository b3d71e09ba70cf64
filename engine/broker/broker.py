"""The embedded broker: one object owning partitions, journals, copier and coordinators.

    broker = Broker.open("/var/lib/twinlog", journal_partitions=4)
    ...
    broker.close()

It runs in-process with no network; ``rpc`` is a thin layer over it. ``Broker`` is
the facade: it opens the parts, checks each request and hands it to the part that
owns it. Background rounds are in ``scheduler``; who may take a group's offsets
into a transaction (KIP-447) is in ``group_offset_fencing``. Data
directory layout (``docs/design.md``):

    DATA_DIR/
      meta                    topics and their configuration, cluster and directory ids
                              (the local MetadataStore: engine.broker.local_metadata_store)
      ids                     producer and transaction id blocks (the local IdSource:
                              engine.transactions.id_allocator)
      logs/TOPIC-PARTITION/   data log segments and indexes (engine.log)
        journal/              the partition's journal log (journal.journal_logs)
      journal/                LMDB: local data journals + transaction index, applied
                              from the journal logs (journal)
      txn/N/                  transaction journal partition N + its checkpoint pointer

Topics, ids and checkpoint pointers come through two Protocols, ``MetadataStore``
and ``IdSource``: the local files by default, a shared store when given to ``open``.

Start-up, in order (each step needs the one before):

    1. topics and ids            the metadata store and the id source
    2. local data journal        open LMDB
    3. partitions                open each data log (log recovery), replay its journal log
                                 into LMDB, then the copier's recovery of half-done
                                 copies against the journal
    4. group offsets             read __consumer_offsets into memory
    5. coordinators              replay each transaction journal from its checkpoint;
                                 prepared transactions are queued for completion
    6. purge                     drop journal leftovers below the coordinators' low watermark
    7. background threads        completers; the scheduler's timeouts, checkpoints,
                                 retention, compaction and log flush

Thread rule: every public method may be called from any thread.
"""

from __future__ import annotations

import logging
import os
import resource
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from twinlog.engine.base.atomic_file import probe_space
from twinlog.engine.base.bounded_cache import BoundedCache
from twinlog.engine.base.errors import (
    BatchTooLargeError,
    CorruptBatchError,
    DiskFullError,
    InvalidConfigError,
    InvalidTxnStateError,
    LogClosedError,
    NotCoordinatorError,
    NotEnoughResourcesError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
    UnknownTransactionError,
)
from twinlog.engine.base.types import (
    FetchResult,
    PartitionDescription,
    ProducerDescription,
    ProduceResult,
    ProducerIdentity,
    TopicDescription,
    TopicPartition,
    TransactionDescription,
)
from twinlog.engine.broker.broker_stats import BrokerStats, collect_stats
from twinlog.engine.broker.config import BrokerConfig
from twinlog.engine.broker.consumer_groups import ConsumerGroups, append_group_records
from twinlog.engine.broker.data_dir_format import check_data_dir_format
from twinlog.engine.broker.group_coordinators import LoadedGroups, load_groups, records_between
from twinlog.engine.broker.group_offset_fencing import GroupOffsetFence, settle_holder
from twinlog.engine.broker.group_offsets import (
    OFFSETS_TOPIC,
    GroupOffsets,
    build_offsets_batch,
    offsets_topic_config,
)
from twinlog.engine.broker.internal_topics import (
    TXN_JOURNAL_TOPIC,
    TXN_JOURNAL_TOPIC_CONFIG,
    coordinator_partition_of_transactional_id,
    is_internal,
)
from twinlog.engine.broker.local_metadata_store import LocalMetadataStore
from twinlog.engine.broker.metadata_store import MetadataStore
from twinlog.engine.broker.partition import Partition
from twinlog.engine.broker.partition_role import PartitionRole, Role
from twinlog.engine.broker.producer_owner import idempotent_transactional_id, is_idempotent
from twinlog.engine.broker.replicated_journal_append import ReplicatedJournalAppend
from twinlog.engine.broker.scheduler import ScheduledTask, Scheduler, broker_tasks
from twinlog.engine.broker.topic_deletion import end_transactions_touching
from twinlog.engine.broker.topic_registry import PARTITIONS_MAX, validate_topic_name
from twinlog.engine.groups.group_calls import (
    OUTSIDE_ANY_GROUP,
    GroupDescription,
    GroupHeartbeat,
    GroupHeartbeatAnswer,
    GroupListing,
    GroupMemberRef,
)
from twinlog.engine.log import LogConfig
from twinlog.engine.records.batch_format import (
    NO_PRODUCER_ID,
    NO_TRANSACTION_ID,
    check_producer_batch,
    check_producer_generation,
    validate_batch,
)
from twinlog.engine.records.decompression_budget import DecompressionBudget
from twinlog.engine.records.produced_records import check_produced_records
from twinlog.engine.records.rewrite import require_keys
from twinlog.engine.replication.fetch_calls import (
    FetchedPartition,
    ReplicaFetch,
    ReplicaFetchPartition,
)
from twinlog.engine.replication.replica_set import IsrChange
from twinlog.engine.replication.replication_settings import ReplicationSettings
from twinlog.engine.transactions.coordinator import Coordinator
from twinlog.engine.transactions.coordinator_slots import CoordinatorSlots
from twinlog.engine.transactions.id_allocator import LocalIdSource
from twinlog.engine.transactions.id_source import IdSource
from twinlog.engine.transactions.partition_calls import (
    PARTITION_GONE,
    ApplyAbort,
    ApplyCommit,
    CountEntries,
    EntryCount,
    IssuedProducer,
    LookupProducer,
    PartitionLeaders,
    RegisterPartition,
    SettleOffsetsHolder,
    TransactionCoordinators,
    coordinator_partition_of,
)
from twinlog.engine.transactions.transaction_metadata import now_ms
from twinlog.engine.transactions.transaction_timings import TransactionTimings
from twinlog.engine.transactions.txn_state import TransactionEvent
from twinlog.journal import JournalLogs, LocalJournal
from twinlog.journal.txn_journal import TxnJournal

log = logging.getLogger(__name__)

IDEMPOTENT_ID_TRIES_PER_PARTITION = 20
INTERNAL_TOPICS_CHECK_MS = 1_000  # a cluster broker creates __txn_journal once enough are live

FILES_PER_PARTITION = 4  # a segment's log (opened twice), offset index and time index
FILES_RESERVED = 256  # sockets, LMDB, transaction journals, ...


# Producer ids whose transactional id this broker keeps after asking their coordinator
# elsewhere (about 100 bytes each).
ISSUED_IDS_CACHED_MAX = 100_000
UNKNOWN_ID_KEPT_S = 5.0


class _LocalApplier:
    """Coordinator -> partition leader calls, in-process (``partition_calls.PartitionLeaders``).

    Each call passes the partition's epoch check first; a gRPC transport replaces this
    in a cluster.
    """

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def _partition(self, topic_partition: TopicPartition) -> Partition | None:
        """The partition, None once its topic is deleted. A cluster broker opens a partition
        of a topic created since it started (its answer then says it does not lead it),
        never taking a live topic for a deleted one."""
        partition = self._broker._partitions.get(topic_partition)
        if partition is None and self._broker.replication is not None:
            try:  # one read of that topic's metadata, refused if it is gone
                return self._broker._cluster_partition(topic_partition)
            except UnknownTopicOrPartitionError:
                return None
        return partition

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        partition = self._partition(topic_partition)
        return 0 if partition is None else partition.epochs.leader_epoch

    def count_entries(self, request: CountEntries) -> EntryCount:
        partition = self._partition(request.topic_partition)
        if partition is None:
            return EntryCount(PARTITION_GONE)
        partition.epochs.check(request.epochs)
        return EntryCount(partition.count_entries(request.transaction_id))

    def apply_commit(self, request: ApplyCommit) -> None:
        transaction_id, topic_partition = request.transaction_id, request.topic_partition
        partition = self._partition(topic_partition)
        if partition is None:
            log.warning(
                "APPLY_COMMIT %d: partition %s no longer exists; skipped",
                transaction_id,
                topic_partition,
            )
            return
        partition.epochs.check(request.epochs)
        journaled_entries = request.entry_count
        if journaled_entries and self._broker.config.accept_journal_loss:
            log.error(
                "APPLY_COMMIT %d on %s: not checking the %d journal entries its commit counted "
                "(accept_journal_loss): whatever the journal lost of it stays lost",
                transaction_id,
                topic_partition,
                journaled_entries,
            )
            journaled_entries = 0
        first_offset, next_offset = partition.apply_commit(
            transaction_id, request.attempts, journaled_entries
        )
        if topic_partition.topic == OFFSETS_TOPIC:
            if next_offset > first_offset:
                self._broker._observe_offsets(partition, first_offset, next_offset)
            self._broker.group_offsets.clear_pending_of(
                request.transaction_id, request.topic_partition.partition
            )

    def apply_abort(self, request: ApplyAbort) -> None:
        partition = self._partition(request.topic_partition)
        if partition is not None:
            partition.epochs.check(request.epochs)
            partition.apply_abort(request.transaction_id)
            if request.topic_partition.topic == OFFSETS_TOPIC:
                self._broker.group_offsets.clear_pending_of(
                    request.transaction_id, request.topic_partition.partition
                )


class _LocalCoordinators:
    """Partition -> coordinator calls (``partition_calls.TransactionCoordinators``): to the
    broker's ``transaction_coordinators`` when one is set (a cluster transport), else to
    this broker's own coordinators, in-process."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def register_partition(self, request: RegisterPartition) -> None:
        elsewhere = self._broker.transaction_coordinators
        if elsewhere is not None:
            elsewhere.register_partition(request)
            return
        self._broker.register_partition_here(request)

    def settle_offsets_holder(self, request: SettleOffsetsHolder) -> None:
        elsewhere = self._broker.transaction_coordinators
        if elsewhere is not None:
            elsewhere.settle_offsets_holder(request)
            return
        self._broker.settle_offsets_holder_here(request)

    def lookup_producer(self, request: LookupProducer) -> IssuedProducer:
        elsewhere = self._broker.transaction_coordinators
        if elsewhere is not None:
            return elsewhere.lookup_producer(request)
        return self._broker.lookup_producer_here(request)


class _ToPartitionLeaders:
    """The coordinators' ``PartitionLeaders``: the broker's ``partition_leaders`` as it is
    at each call (in-process by default; a cluster transport replaces it)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        return self._broker.partition_leaders.leader_epoch(topic_partition)

    def count_entries(self, request: CountEntries) -> EntryCount:
        return self._broker.partition_leaders.count_entries(request)

    def apply_commit(self, request: ApplyCommit) -> None:
        self._broker.partition_leaders.apply_commit(request)

    def apply_abort(self, request: ApplyAbort) -> None:
        self._broker.partition_leaders.apply_abort(request)


class Broker:
    def __init__(
        self,
        data_dir: Path,
        config: BrokerConfig,
        metadata: MetadataStore | None = None,
        ids: IdSource | None = None,
        broker_id: int | None = None,
        coordinator_ids: Callable[[], IdSource] | None = None,
    ) -> None:
        """Use ``Broker.open``."""
        self._given_coordinator_ids = coordinator_ids
        self._local_coordinators: list[Coordinator] = []  # a single-node broker's, by partition
        self._coordinator_slots: CoordinatorSlots[Coordinator] | None = None  # a cluster's
        # a cluster broker's group coordinators (group_coordinators), and the lock that keeps
        # a partition's load and an APPLY's fold of offsets apart
        self._group_slots: CoordinatorSlots[LoadedGroups] | None = None
        self._offsets_load_lock = threading.RLock()
        # a cluster broker's internal topics not seen yet (ensure_internal_topics)
        self._internal_topics_missing = {TXN_JOURNAL_TOPIC, OFFSETS_TOPIC}
        self.data_dir = data_dir
        self.config = config
        self.broker_id = broker_id
        # A cluster broker's partitions are replicated; they wake the followers' long polls
        # waiting in replica_fetch through this condition.
        self._replica_data = threading.Condition()
        self.replication = (
            None
            if broker_id is None
            else ReplicationSettings(
                broker_id,
                min_insync_replicas=config.min_insync_replicas,
                lag_time_max_ms=config.replica_lag_time_max_ms,
                ack_timeout_ms=config.replica_ack_timeout_ms,
                replica_fsync=config.replica_fsync,
                on_data=self._notify_replica_data,
            )
        )
        self._given_metadata = metadata  # None: the local files, opened by _start
        self._given_ids = ids
        self._closed = False
        self._admin_lock = threading.RLock()
        self._partitions: dict[TopicPartition, Partition] = {}
        self.scheduler = Scheduler()
        self._decompression_budget = DecompressionBudget(config.decompressed_bytes_in_flight_max)
        self.transaction_timings = TransactionTimings()  # shared by the coordinators
        # The coordinator <-> partition seam (partition_calls): in-process by default. In a
        # cluster a transport replaces them, so a coordinator reaches partitions led
        # elsewhere and a partition reaches the coordinator of a transaction begun elsewhere.
        # ``local_partition_leaders`` and ``register_partition_here`` are what a transport's
        # server side calls: this broker's own partitions and coordinators, never forwarded.
        self.local_partition_leaders: PartitionLeaders = _LocalApplier(self)
        self.partition_leaders: PartitionLeaders = self.local_partition_leaders
        self.transaction_coordinators: TransactionCoordinators | None = None
        # producer id -> the transactional id it was issued for, asked of other brokers'
        # coordinators (never changes once issued; bounded, the oldest dropped first)
        self._issued_transactional_ids = BoundedCache[int, str](ISSUED_IDS_CACHED_MAX)
        # producer id -> when its coordinator said it never issued it (kept a few seconds:
        # an id is issued before its producer sends, so "unknown" does not last)
        self._unknown_producer_ids = BoundedCache[int, float](ISSUED_IDS_CACHED_MAX)

    # --- life cycle ---------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        data_dir: str | os.PathLike[str],
        *,
        metadata: MetadataStore | None = None,
        ids: IdSource | None = None,
        broker_id: int | None = None,
        coordinator_ids: Callable[[], IdSource] | None = None,
        **config: Any,
    ) -> Broker:
        """Open (creating if needed) the broker in ``data_dir`` and recover it.

        ``metadata`` and ``ids`` default to the data directory's own files
        (``LocalMetadataStore``, ``LocalIdSource``). ``broker_id``: a cluster broker,
        whose partitions are replicated and serve nothing until the cluster gives each
        a role (``take_partition_role``); None: the single-node broker.
        ``coordinator_ids``: a cluster broker's source of ids for each coordinator it
        loads, taking a fresh block so ids stay increasing per coordinator across
        brokers (``ZooKeeperIdSource``); default ``ids``.
        """
        directory = Path(data_dir)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:  # a file, or a parent we may not write: the user's path
            reason = "it is not a directory" if directory.exists() else error.strerror or error
            raise InvalidConfigError(
                f"cannot use {str(directory)!r} as the data directory: {reason}; pass a "
                "directory this user may write (it is created if missing)"
            ) from None
        if not os.access(directory, os.W_OK | os.X_OK):
            raise InvalidConfigError(
                f"cannot use {str(directory)!r} as the data directory: this user may not "
                "write in it; pass a directory this user may write"
            )
        broker = cls(
            directory, BrokerConfig.from_mapping(config), metadata, ids, broker_id, coordinator_ids
        )
        try:
            broker._start()
        except BaseException:
            try:
                broker._close_opened()
            except BaseException as close_error:  # never over the reason the start failed
                log.warning("closing after a failed start: %s", close_error)
            raise
        broker._say_if_disk_full()
        return broker

    def _say_if_disk_full(self) -> None:
        """One line if the data directory's volume is full: the broker serves reads only.

        Nothing is switched off: every write fails on its own with DiskFullError
        (retriable) and works again as soon as space returns.
        """
        try:
            probe_space(self.data_dir)
        except DiskFullError as error:
            log.warning(
                "the disk is full (%s): the broker started read-only; fetches work, produce, "
                "commits and topic changes fail with DiskFullError (retriable) until you free "
                "space on the volume of %s",
                error.__cause__ or error,
                self.data_dir,
            )

    def _start(self) -> None:
        started = time.monotonic()
        config = self.config
        # 0. the batch format, before anything is opened (an old one is refused, not "repaired")
        check_data_dir_format(self.data_dir)
        # 1. topics and ids
        self.metadata = self._given_metadata or LocalMetadataStore(
            self.data_dir, config.journal_partitions
        )
        if self.metadata.journal_partitions != config.journal_partitions:
            log.info(
                "data directory has %d transaction journal partitions; using that (config says %d)",
                self.metadata.journal_partitions,
                config.journal_partitions,
            )
        self.ids = self._given_ids or LocalIdSource(self.data_dir / "ids")
        # 2. local data journal
        self.journal = JournalLogs(
            LocalJournal.open(
                self.data_dir / "journal",
                map_size_bytes=config.journal_map_bytes_initial,
                sync_mode=config.journal_sync_mode,
                entry_batches=config.journal_entry_batches,
            )
        )
        # 3. partitions (data log recovery, then copier recovery); a cluster's
        # __consumer_offsets is created like __txn_journal, replicated (ensure_internal_topics)
        if self.replication is None and OFFSETS_TOPIC not in self.metadata.topics():
            try:
                self.metadata.add_topic(
                    OFFSETS_TOPIC,
                    config.offsets_partitions,
                    offsets_topic_config({}, config.offsets_segment_bytes),
                )
            except TopicExistsError:
                pass  # another broker on the same ZooKeeper metadata created it first
        topics = self.metadata.topics()  # one read (ZooKeeper's, in a cluster)
        offsets_partitions = config.offsets_partitions
        offsets_topic = topics.get(OFFSETS_TOPIC)
        if offsets_topic is not None:  # older directories: not compacted
            offsets_topic.config = offsets_topic_config(
                offsets_topic.config, config.offsets_segment_bytes
            )
            offsets_partitions = offsets_topic.partitions
        for name, topic in topics.items():
            for partition_index in range(topic.partitions):
                self._open_partition(TopicPartition(name, partition_index), topic.config)
        # 4. group offsets: a single-node broker's, all folded now; a cluster broker's, each
        # partition's as it comes to lead it (group_coordinators)
        self.group_offsets = GroupOffsets(offsets_partitions)
        if self.replication is None:
            for partition_index in range(self.group_offsets.partition_count):
                partition = self._partitions[TopicPartition(OFFSETS_TOPIC, partition_index)]
                self._observe_offsets(
                    partition, partition.log.log_start_offset, partition.log.log_end_offset
                )
        else:
            self._group_slots = CoordinatorSlots(
                offsets_partitions,
                self._load_groups,
                self._unload_groups,
                self.scheduler.is_stopping,
                kind="group coordinator",
                topic=OFFSETS_TOPIC,
            )
        self.offset_fence = GroupOffsetFence(
            self.group_offsets, _LocalCoordinators(self).settle_offsets_holder
        )
        self._append_group_records = append_group_records(self._observe_offsets)
        self.consumer_groups = ConsumerGroups(
            self.group_offsets,
            self.offset_fence,
            self._group_coordinator,
            self._append_group_records,
            self._topic_partition_counts,
            config.group_heartbeat_interval_ms,
        )
        # 5. coordinators: a single-node broker's, each over its local journal; a cluster
        # broker's load as it comes to lead their __txn_journal partitions (coordinator_slots)
        self._applier = _ToPartitionLeaders(self)
        replayed = 0
        if self.replication is None:
            self._local_coordinators = [
                Coordinator(
                    journal_partition_index,
                    TxnJournal(
                        self.data_dir / "txn" / str(journal_partition_index),
                        pointers=self.metadata.checkpoint_pointers(journal_partition_index),
                    ),
                    self.ids,
                    self._applier,
                    on_complete=self.offset_fence.release,
                    timings=self.transaction_timings,
                )
                for journal_partition_index in range(self.metadata.journal_partitions)
            ]
            replayed = sum(coordinator.recover() for coordinator in self._local_coordinators)
            for coordinator in self._local_coordinators:
                self._restore_offset_fence(coordinator)
        else:
            self.ensure_internal_topics()
            self._coordinator_slots = CoordinatorSlots(
                self.metadata.journal_partitions,
                self._load_coordinator,
                self._unload_coordinator,
                self.scheduler.is_stopping,
            )
        # 6. purge leftovers of transactions no coordinator knows (a cluster broker leads
        # nothing yet: its leaders purge in the checkpoint rounds)
        try:
            purged = (
                0
                if self.replication is not None
                else self.journal.purge_below(self.low_watermark())
            )
        except DiskFullError as error:
            # A tidy-up, not a step the next ones need: the scheduler's checkpoint round
            # purges again once space returns.
            log.warning("journal purge deferred: %s", error)
            purged = 0
        # 7. background work
        for coordinator in self.coordinators:
            coordinator.start()
        self.scheduler.start(
            [
                *broker_tasks(
                    config,
                    lambda: self.coordinators,
                    self.journal,
                    self.low_watermark,
                    partitions=lambda: list(self._partitions.values()),
                    should_stop=self.scheduler.is_stopping,
                    expire_group_members=self.consumer_groups.membership.expire,
                ),
                *self._cluster_tasks(),
            ]
        )
        log.info(
            "broker open in %s: %d topics, %d partitions, %d journal records replayed, %d leftover "
            "journal entries purged, %.0f ms",
            self.data_dir,
            len(self.metadata.topics()),
            len(self._partitions),
            replayed,
            purged,
            (time.monotonic() - started) * 1000,
        )

    @property
    def coordinators(self) -> list[Coordinator]:
        """The coordinators active on this broker: all of a single-node broker's; those of
        the journal partitions a cluster broker leads and has loaded."""
        if self._coordinator_slots is not None:
            return self._coordinator_slots.active()
        return self._local_coordinators

    def _restore_offset_fence(self, coordinator: Coordinator) -> None:
        for described in coordinator.list_transactions():
            txn = coordinator.transaction(described.transaction_id)
            if txn is not None:
                self.offset_fence.restore(txn)

    # --- a cluster broker's coordinators (CLUSTER.md §3.5) ---------------------------------

    def _ensure_internal_topic(self, name: str, partitions: int, config: dict[str, str]) -> bool:
        """Create internal topic ``name`` (RF ``default_replication_factor``, Kafka's
        transaction.state.log / offsets.topic replication factors) if no broker has: refused
        while fewer brokers are live than that, so the ``internal-topics`` task tries again
        every second. True once it exists (the caller stops asking); reads that one topic."""
        try:
            existing = self.metadata.get_topic(name)
        except UnknownTopicOrPartitionError:
            pass
        else:
            if existing.partitions != partitions:
                log.error(
                    "%s has %d partitions, this broker expected %d: keys would hash to other "
                    "partitions here than at the other brokers; restart this broker with the "
                    "cluster's count (journal_partitions / offsets_partitions=%d)",
                    name,
                    existing.partitions,
                    partitions,
                    existing.partitions,
                )
            return True
        try:
            self.metadata.add_topic(
                name, partitions, config, replication_factor=self.config.default_replication_factor
            )
            log.info(
                "created %s: %d partitions, replication factor %d",
                name,
                partitions,
                self.config.default_replication_factor,
            )
        except TopicExistsError:
            pass  # another broker created it first
        except InvalidConfigError as error:  # too few live brokers yet
            log.info("%s not created yet: %s", name, error)
        return False

    def _cluster_tasks(self) -> list[ScheduledTask]:
        if self.replication is None:
            return []
        return [
            ScheduledTask(
                "internal-topics", lambda: INTERNAL_TOPICS_CHECK_MS, self.ensure_internal_topics
            )
        ]

    def ensure_internal_topics(self) -> None:
        """A cluster broker's periodic check that its internal topics exist."""
        if self.replication is None or self._closed:
            return
        missing = self._internal_topics_missing
        if TXN_JOURNAL_TOPIC in missing and self._ensure_internal_topic(
            TXN_JOURNAL_TOPIC, self.metadata.journal_partitions, dict(TXN_JOURNAL_TOPIC_CONFIG)
        ):
            missing.discard(TXN_JOURNAL_TOPIC)
        if OFFSETS_TOPIC in missing and self._ensure_internal_topic(
            OFFSETS_TOPIC,
            self.group_offsets.partition_count,
            offsets_topic_config({}, self.config.offsets_segment_bytes),
        ):
            missing.discard(OFFSETS_TOPIC)

    def _load_groups(self, partition_index: int, leader_epoch: int) -> LoadedGroups:
        """Group coordinator ``partition_index``: fold ``__consumer_offsets-P`` in, as its
        leader at ``leader_epoch`` (group_coordinators)."""
        started = time.monotonic()
        partition = self._cluster_partition(TopicPartition(OFFSETS_TOPIC, partition_index))
        self.consumer_groups.drop_partition(partition_index)  # members of an earlier term
        loaded = load_groups(
            partition, self.journal, self.group_offsets, leader_epoch, self._offsets_load_lock
        )
        log.info(
            "group coordinator %d loaded at epoch %d: %d committed offsets, %.0f ms",
            partition_index,
            leader_epoch,
            loaded.keys,
            (time.monotonic() - started) * 1000,
        )
        return loaded

    def _unload_groups(self, loaded: LoadedGroups) -> None:
        with self._offsets_load_lock:
            self.group_offsets.drop_partition(loaded.partition_index)
        self.consumer_groups.drop_partition(loaded.partition_index)  # they join the new one
        log.info("group coordinator %d unloaded", loaded.partition_index)

    def _group_coordinator(self, group_id: str) -> Partition:
        """The offsets partition of ``group_id``, once this broker is its group coordinator:
        NotCoordinatorError or CoordinatorLoadInProgressError (retriable) otherwise."""
        topic_partition = self.group_offsets.partition_for(group_id)
        if self._group_slots is None:
            return self._partitions[topic_partition]
        self._group_slots.get(topic_partition.partition)
        return self._cluster_partition(topic_partition)

    def _load_coordinator(self, journal_partition: int, leader_epoch: int) -> Coordinator:
        """Coordinator ``journal_partition`` from its replicated journal, as the leader of
        ``__txn_journal-N`` at ``leader_epoch``: barrier, replay, redo, start."""
        partition = self._cluster_partition(TopicPartition(TXN_JOURNAL_TOPIC, journal_partition))
        committed_end = partition.wait_committed_to_end(leader_epoch)
        slots = self._coordinator_slots
        assert slots is not None
        journal = TxnJournal(
            partition.directory,
            log=partition.log,
            append=ReplicatedJournalAppend(
                partition,
                leader_epoch,
                lambda: slots.write_lost(journal_partition, leader_epoch),
            ),
            pointers=self.metadata.checkpoint_pointers(journal_partition, leader_epoch),
        )
        coordinator = Coordinator(
            journal_partition,
            journal,
            self._coordinator_ids(),
            self._applier,
            on_complete=self.offset_fence.release,
            timings=self.transaction_timings,
            coordinator_epoch=leader_epoch,
        )
        started = time.monotonic()
        replayed = coordinator.recover()
        self._restore_offset_fence(coordinator)
        coordinator.start()
        log.info(
            "transaction coordinator %d loaded at epoch %d: %d journal records replayed "
            "(committed end %d), %d transactions in flight, %.0f ms",
            journal_partition,
            leader_epoch,
            replayed,
            committed_end,
            coordinator.in_flight_count(),
            (time.monotonic() - started) * 1000,
        )
        return coordinator

    def _coordinator_ids(self) -> IdSource:
        given = self._given_coordinator_ids
        return self.ids if given is None else given()

    def _unload_coordinator(self, coordinator: Coordinator) -> None:
        """Stop a coordinator this broker no longer leads as a crash would: it completes
        nothing more (its successor redoes what it left) and writes nothing more."""
        coordinator.abandon()
        log.info("transaction coordinator %d unloaded", coordinator.partition_index)

    def wait_coordinator(self, journal_partition: int, timeout_s: float) -> bool:
        """Until this cluster broker's coordinator ``journal_partition`` is active."""
        slots = self._coordinator_slots
        return slots is not None and slots.wait_active(journal_partition, timeout_s)

    def _open_partition(
        self, topic_partition: TopicPartition, topic_config: Mapping[str, str]
    ) -> Partition:
        directory = self.data_dir / "logs" / str(topic_partition)
        partition = Partition(
            topic_partition,
            directory,
            self._log_config(topic_config),
            self.journal,
            coordinators=_LocalCoordinators(self),
            replication=self.replication,
        )
        self._partitions[topic_partition] = partition
        return partition

    def _log_config(self, topic_config: Mapping[str, str]) -> LogConfig:
        defaults = {
            "segment_bytes": self.config.log_segment_bytes,
            "retention_ms": self.config.log_retention_ms,
            "retention_bytes": self.config.log_retention_bytes,
            "flush_policy": self.config.log_flush_policy,
            "batch_bytes_max": self.config.batch_bytes_max,
        }
        return LogConfig.from_mapping({**defaults, **topic_config})

    def close(self) -> None:
        """Stop background work, finish completions in progress, flush and close everything."""
        if self._closed:
            return
        self._closed = True
        self.scheduler.stop()
        self._close_opened()
        log.info("broker closed")

    def _close_opened(self) -> None:
        """Close every part that was opened, even when one fails; raise the first error.

        On a full disk a part may fail to save a checkpoint: the others must still be
        closed (the journal's lock released), so the next start is not refused.
        """
        if self._coordinator_slots is not None:
            for coordinator in self._coordinator_slots.close():
                coordinator.abandon()  # nothing more is written; the next leader redoes it
        if self._group_slots is not None:
            self._group_slots.close()
        parts: list[Any] = [
            *self._local_coordinators,
            *self._partitions.values(),
            getattr(self, "journal", None),
        ]
        first_error: BaseException | None = None
        for part in parts:
            if part is None:
                continue
            try:
                part.close()
            except BaseException as error:
                log.warning("closing %r failed: %s", part, error)
                first_error = first_error or error
        if first_error is not None:
            raise first_error

    def __enter__(self) -> Broker:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError("the broker is closed; open it again")

    # --- transaction ids ----------------------------------------------------------------------

    def low_watermark(self) -> int:
        """Smallest transaction id that may still be in flight: ids below it are all complete.

        The next id is read *before* the coordinators: a transaction begun after that
        read has an id at or above it, and one begun before it is in its coordinator's
        table by then (begin allocates the id and registers the transaction under one
        lock). Read the other way round, a begin in between would get an id below the
        watermark, and the journal purge would drop its acknowledged batches.
        """
        if self.replication is not None:
            return self._cluster_low_watermark()
        next_transaction_id = self.ids.peek("transaction_id") << 8
        marks = [mark for c in self.coordinators if (mark := c.low_watermark()) is not None]
        return min([*marks, next_transaction_id])

    def _cluster_low_watermark(self) -> int:
        """A cluster broker's: the smallest low watermark the coordinators published with
        their checkpoint pointers (CLUSTER.md §3.7), 0 while any has published none.

        Another broker's coordinator may hold in-flight transactions with ids below this
        broker's next id, so only the coordinators' own word counts. A published mark
        stays a lower bound for good: a coordinator's ids only grow, also across failover.
        """
        marks = []
        for journal_partition in range(self.metadata.journal_partitions):
            pointer = self.metadata.checkpoint_pointers(journal_partition).read()
            if pointer is None or pointer.low_watermark is None:
                return 0
            marks.append(pointer.low_watermark)
        return min(marks)

    # --- topics -----------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> TopicDescription:
        self._check_open()
        config = dict(config or {})
        replication_factor = self._replication_factor(config)  # taken out of the config
        self._log_config(config)  # refuse a bad config before anything is written
        with self._admin_lock:
            self._check_open_files(partitions)
            self._remove_leftovers(name, partitions)
            self.metadata.add_topic(
                name, partitions, config, replication_factor=replication_factor or 1
            )
            for partition_index in range(partitions):
                self._open_partition(TopicPartition(name, partition_index), config)
        log.info("created topic %s with %d partitions", name, partitions)
        return self.describe_topic(name)

    def _replication_factor(self, config: dict[str, str]) -> int | None:
        """``replication.factor`` of a new topic, removed from ``config`` (it is the
        cluster's, not the log's); None on a single-node broker, which keeps one copy."""
        given = config.pop("replication.factor", config.pop("replication_factor", None))
        if self.replication is None:
            if given not in (None, "1", 1):
                raise InvalidConfigError(
                    f"replication.factor {given!r}: a single-node broker keeps one copy of "
                    "each partition; start a cluster (twinlog serve --zookeeper) to replicate"
                )
            return None
        try:
            factor = self.config.default_replication_factor if given is None else int(given)
        except ValueError:
            raise InvalidConfigError(
                f"replication.factor {given!r} is not a whole number"
            ) from None
        if factor < 1:
            raise InvalidConfigError(f"replication.factor {factor}: use 1 or more")
        return factor

    def _remove_leftovers(self, name: str, partition_count: object) -> None:
        """Remove the partition directories a deleted topic of this name left (the broker
        stopped between writing meta and removing them): a new topic is another topic."""
        validate_topic_name(name)  # first: the name becomes a path
        if name in self.metadata.topics() or not isinstance(partition_count, int):
            return  # refused by the registry below
        for partition_index in range(min(max(partition_count, 0), PARTITIONS_MAX)):
            leftover = self.data_dir / "logs" / str(TopicPartition(name, partition_index))
            if leftover.exists():
                log.warning("removing %s, left by a deleted topic of the same name", leftover)
                shutil.rmtree(leftover)
            # What LMDB applied from that partition's journal log (a crash before the
            # delete told it) must go too: the new partition's journal log starts at 0.
            self.journal.delete_partition(str(TopicPartition(name, partition_index)))

    def _check_open_files(self, partition_count: object) -> None:
        """Refuse a topic whose partitions would exhaust the process's open-files limit."""
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        wanted = partition_count if isinstance(partition_count, int) and partition_count > 0 else 0
        needed = (len(self._partitions) + wanted) * FILES_PER_PARTITION + FILES_RESERVED
        if limit != resource.RLIM_INFINITY and needed > limit:
            raise NotEnoughResourcesError(
                f"{wanted} more partitions would need about {needed} open files, above this "
                f"process's limit of {limit} (ulimit -n); raise the limit or use fewer partitions"
            )

    def delete_topic(self, name: str) -> None:
        self._check_open()
        if is_internal(name):
            raise InvalidConfigError(f"{name} is internal and cannot be deleted")
        with self._admin_lock:
            topic = self.metadata.get_topic(name)
            gates = [
                self._partitions[TopicPartition(name, index)].send_gate
                for index in range(topic.partitions)
            ]
            for gate in gates:
                gate.close()
            try:  # topic_deletion.py: its open transactions must not outlive it
                end_transactions_touching(name, self.coordinators)
            except BaseException:
                for gate in gates:
                    gate.reopen()
                raise
            self.metadata.remove_topic(name)
            for partition_index in range(topic.partitions):
                partition = self._partitions.pop(TopicPartition(name, partition_index))
                partition.close()
                # The journal log goes with the directory: LMDB forgets what it applied
                # from it, or a topic created again would find a log shorter than that.
                self.journal.delete_partition(partition.name)
                shutil.rmtree(partition.directory, ignore_errors=True)
        log.info("deleted topic %s", name)

    def list_topics(self) -> list[str]:
        return sorted(name for name in self.metadata.topics() if not is_internal(name))

    def _topic_partition_counts(self) -> dict[str, int]:
        """Every topic a group may subscribe to, with its partition count."""
        return {
            name: topic.partitions
            for name, topic in self.metadata.topics().items()
            if not is_internal(name)
        }

    def describe_topic(self, name: str) -> TopicDescription:
        topic = self.metadata.get_topic(name)
        pending = self.journal.statistics().pending_by_partition
        partitions = []
        for partition_index in range(topic.partitions):
            partition = self._partition(name, partition_index)
            entries, size_bytes = pending.get(partition.name, (0, 0))
            partitions.append(
                PartitionDescription(
                    partition=partition_index,
                    log_start_offset=partition.log.log_start_offset,
                    log_end_offset=partition.high_watermark.value,  # what consumers may read
                    journal_entries_pending=entries,
                    journal_bytes_pending=size_bytes,
                )
            )
        return TopicDescription(name, tuple(partitions), dict(topic.config), topic.topic_id)

    def _partition(self, topic: str, partition_index: int) -> Partition:
        found = self._partitions.get(TopicPartition(topic, partition_index))
        if found is None and self.replication is not None and topic in self.metadata.topics():
            # a topic another broker created: opened with no role, it refuses clients
            # (NotLeaderOrFollowerError) until the cluster names its leader
            found = self._cluster_partition(TopicPartition(topic, partition_index))
        if found is None:
            known = self.metadata.topics().get(topic)
            if known is not None:
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} has partitions 0..{known.partitions - 1}, "
                    f"not {partition_index}"
                )
            self.metadata.get_topic(topic)  # raises the "create it first" error
        assert found is not None
        return found

    # --- producing ------------------------------------------------------------------------------

    def _coordinator_at(self, journal_partition: int) -> Coordinator:
        """Coordinator N: NotCoordinatorError / CoordinatorLoadInProgressError on a cluster
        broker that does not lead (or is loading) ``__txn_journal-N``."""
        if self._coordinator_slots is not None:
            return self._coordinator_slots.get(journal_partition)
        return self._local_coordinators[journal_partition]

    def _coordinator_for_id(self, identifier: int) -> Coordinator:
        coordinator_index = coordinator_partition_of(identifier)
        if coordinator_index >= self.metadata.journal_partitions:
            raise InvalidTxnStateError(f"id {identifier} was not issued by this broker")
        return self._coordinator_at(coordinator_index)

    def _coordinator_for_transactional_id(self, transactional_id: str) -> Coordinator:
        return self._coordinator_at(
            coordinator_partition_of_transactional_id(
                transactional_id, self.metadata.journal_partitions
            )
        )

    def init_producer(
        self,
        transactional_id: str | None = None,
        transaction_timeout_ms: int | None = None,
        owner: str | None = None,
    ) -> ProducerIdentity:
        """Producer id and generation. No transactional id: a fresh idempotent producer,
        given to principal ``owner`` if named (``producer_owner``)."""
        self._check_open()
        if transactional_id is None:
            transactional_id = self._idempotent_transactional_id(owner)
        elif not transactional_id or is_idempotent(transactional_id):
            raise InvalidConfigError(f"transactional id {transactional_id!r} is not allowed")
        if (
            transaction_timeout_ms is not None
            and transaction_timeout_ms > self.config.transaction_timeout_ms_max
        ):
            raise InvalidConfigError(
                f"transaction timeout {transaction_timeout_ms} ms is above the broker's maximum "
                f"{self.config.transaction_timeout_ms_max} ms (transaction_timeout_ms_max)"
            )
        coordinator = self._coordinator_for_transactional_id(transactional_id)
        return coordinator.init_producer(
            transactional_id, transaction_timeout_ms or self.config.transaction_timeout_ms_default
        )

    def _idempotent_transactional_id(self, owner: str | None) -> str:
        """A made-up transactional id for an idempotent producer; in a cluster, one that one
        of this broker's active coordinators owns (made up again until it is: each try
        uses an id, and one in ``journal_partitions`` lands on a given coordinator)."""
        if self._coordinator_slots is None:
            return idempotent_transactional_id(self.ids.next("producer_id"), owner)
        active = {c.partition_index for c in self.coordinators}
        if not active:
            raise NotCoordinatorError(
                "this broker coordinates no transaction journal partition yet, so it cannot "
                "give an idempotent producer its id; ask another broker"
            )
        partitions = self.metadata.journal_partitions
        for _ in range(IDEMPOTENT_ID_TRIES_PER_PARTITION * partitions):
            candidate = idempotent_transactional_id(self.ids.next("producer_id"), owner)
            if coordinator_partition_of_transactional_id(candidate, partitions) in active:
                return candidate
        raise NotCoordinatorError(
            f"no made-up idempotent id landed on this broker's coordinators {sorted(active)}; retry"
        )

    def produce(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        attempt: str = "",
        transaction_id: int = NO_TRANSACTION_ID,
    ) -> ProduceResult:
        """Append a plain batch to the data log, or journal a transactional one.

        ``attempt`` tags a transactional batch with the writer's task attempt (the
        Spark sink); a commit naming attempts applies only theirs. ``transaction_id``
        names the transaction of a transactional batch (the batch carries only the
        transactional bit, as in Kafka); when not given, the producer's open one.
        """
        self._check_open()
        target = self._partition(topic, partition)
        if len(batch) > self.config.batch_bytes_max:
            raise BatchTooLargeError(
                f"batch of {len(batch)} bytes is larger than batch_bytes_max "
                f"({self.config.batch_bytes_max}); send smaller batches or raise the limit"
            )
        header = validate_batch(batch)
        if header.size_bytes != len(batch):  # the copier could never apply the extra bytes
            raise CorruptBatchError(
                f"request holds {len(batch)} bytes, its batch's length field says "
                f"{header.size_bytes}: send exactly one batch per request"
            )
        check_producer_batch(header)  # else one record could move the log end by 2**31
        check_producer_generation(header.producer_generation)
        if topic == OFFSETS_TOPIC:  # its records are the broker's own (group offsets)
            raise InvalidConfigError(f"{OFFSETS_TOPIC} is internal: commit offsets instead")
        if topic == TXN_JOURNAL_TOPIC:  # the coordinators' own records
            raise InvalidConfigError(f"{TXN_JOURNAL_TOPIC} is internal: no client writes it")
        # Every record, before anything is written: what the log stores, every reader accepts.
        records = check_produced_records(
            batch,
            header,
            topic=topic,
            partition=partition,
            records_max=self.config.batch_records_max,
            decompressed_bytes_max=self.config.batch_decompressed_bytes_max,
            budget=self._decompression_budget,
        )
        if target.log.config.compacts:  # a keyless record could never be compacted away
            require_keys(batch, header, f"topic {topic}", records)
        if not header.is_transactional:
            if transaction_id != NO_TRANSACTION_ID:
                raise InvalidConfigError(
                    f"the request names transaction {transaction_id}, but its batch is not "
                    "transactional (attributes bit 4): build it with transactional=True"
                )
            if attempt:
                raise InvalidConfigError("an attempt tag needs a transactional batch")
            return target.append_plain(batch, header)
        if header.producer_id == NO_PRODUCER_ID:
            raise InvalidConfigError(
                "a transactional batch needs the producer id and generation init_producer() "
                "returned; this one carries none"
            )
        if transaction_id == NO_TRANSACTION_ID:
            # On a cluster broker the producer's coordinator may be elsewhere: then this
            # raises NotCoordinatorError, and the client must name the transaction.
            coordinator = self._coordinator_for_id(header.producer_id)
            # A client that does not name the transaction (Kafka's protocol has no field for
            # it): the producer's open transaction, refused when it has none, so a late batch
            # never joins a transaction begun after its own ended. The window that remains: a
            # batch delayed past its transaction's end *and* the next one's begin joins that
            # next one (KAFKA-17754); KIP-890 closes it by bumping the producer epoch at every
            # transaction end, for the Kafka-protocol issue. Clients of this broker name the
            # transaction, and for them the checks below already refuse such a batch.
            transaction_id = coordinator.open_transaction_of(
                header.producer_id, header.producer_generation
            )
        # The partition registers itself with the transaction's coordinator on the first
        # batch, and checks the later ones itself (partition_calls).
        return target.append_transactional(transaction_id, batch, header, attempt)

    def register_partition_here(self, request: RegisterPartition) -> None:
        """A partition leader's first batch of a transaction this broker coordinates
        (``partition_calls``); NotCoordinatorError when another broker coordinates it."""
        self._check_open()
        self._coordinator_for_id(request.transaction_id).register_partition(request)

    def _coordinator_of_transaction(self, transaction_id: int, producer_id: int) -> Coordinator:
        coordinator = self._coordinator_for_id(transaction_id)
        if coordinator is not self._coordinator_for_id(producer_id):
            raise InvalidTxnStateError(
                f"transaction {transaction_id} and producer {producer_id} belong to different "
                "coordinators: the transaction is not this producer's"
            )
        return coordinator

    def begin_transaction(
        self, producer_id: int, producer_generation: int, request_id: int = 0
    ) -> int:
        self._check_open()
        open_count = sum(c.in_flight_count() for c in self.coordinators)
        if open_count >= self.config.open_transactions_max:
            raise NotEnoughResourcesError(
                f"{open_count} transactions are open, the broker's limit (open_transactions_max); "
                "retry when some complete, or raise the limit"
            )
        return self._coordinator_for_id(producer_id).begin(
            producer_id, producer_generation, request_id
        )

    def add_partitions_to_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        partitions: Iterable[TopicPartition],
    ) -> None:
        self._check_open()
        wanted = [TopicPartition(*p) for p in partitions]
        for topic_partition in wanted:
            self._partition(topic_partition.topic, topic_partition.partition)
        self._coordinator_of_transaction(transaction_id, producer_id).add_partitions(
            transaction_id, producer_id, producer_generation, wanted
        )

    def send_offsets_to_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        member: GroupMemberRef = OUTSIDE_ANY_GROUP,
    ) -> None:
        """Journal the group's offsets in the transaction; they apply with it (KIP-447
        rules: a ``member`` of the group's current generation, ``group_offset_fencing``)."""
        self._check_open()
        wanted = {TopicPartition(*p): int(o) for p, o in offsets.items()}
        if not group_id:
            raise InvalidConfigError("group id must not be empty")
        if self.replication is not None:
            self._send_offsets_as_group_coordinator(
                transaction_id, producer_id, producer_generation, group_id, wanted, member
            )
            return
        coordinator = self._coordinator_of_transaction(transaction_id, producer_id)
        # The request's own transaction first (writes nothing): a stale or made-up one
        # must not abort the transaction that holds the offsets.
        coordinator.add_partitions(transaction_id, producer_id, producer_generation, ())
        offsets_partition = self.group_offsets.partition_for(group_id)
        with self.consumer_groups.committing(group_id, member, wanted):
            self.offset_fence.take(
                transaction_id,
                group_id,
                wanted,
                lambda: coordinator.add_offsets(
                    transaction_id,
                    producer_id,
                    producer_generation,
                    group_id,
                    offsets_partition,
                    wanted,
                ),
                newcomer_is_member=bool(member.member_id),
            )
            batch = build_offsets_batch(group_id, wanted, transactional=True)
            target = self._partitions[offsets_partition]
            target.append_transactional(
                transaction_id,
                batch,
                validate_batch(batch),
                sender=(producer_id, producer_generation),
            )

    def _send_offsets_as_group_coordinator(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        member: GroupMemberRef,
    ) -> None:
        """A cluster broker, as the group's coordinator (the leader of its offsets
        partition P), which the transaction's coordinator may not be: P registers with the
        transaction first (its coordinator checks the producer and the state, and journals P
        in it, so a stale or made-up transaction aborts nobody), then the fence settles the
        offsets' holders with their coordinators, then the offsets batch is journaled on P
        like any transactional batch; it is folded into memory when its APPLY comes."""
        target = self._group_coordinator(group_id)
        with self.consumer_groups.committing(group_id, member, offsets):
            sender = (producer_id, producer_generation)
            target.register_transaction(transaction_id, sender)
            batch = build_offsets_batch(group_id, offsets, transactional=True)
            header = validate_batch(batch)
            self.offset_fence.take(
                transaction_id,
                group_id,
                offsets,
                lambda: target.append_transactional(transaction_id, batch, header, sender=sender),
                newcomer_is_member=bool(member.member_id),
            )

    @property
    def decompression_budget(self) -> DecompressionBudget:
        """What every produced batch's records check reserves decompressed bytes from; the
        Kafka listener's rewrites reserve from it too (one bound for both doors)."""
        return self._decompression_budget

    def lookup_producer_here(self, request: LookupProducer) -> IssuedProducer:
        """What this broker's coordinator of ``request.producer_id`` knows of it (the
        transport's server side calls this); NotCoordinatorError when another broker
        coordinates it."""
        self._check_open()
        coordinator = self._coordinator_for_id(request.producer_id)
        return IssuedProducer(
            coordinator.transactional_id_of(request.producer_id),
            coordinator.ongoing_transaction_of(request.producer_id, request.producer_generation),
        )

    def lookup_producer(self, producer_id: int, producer_generation: int) -> IssuedProducer:
        """What ``producer_id``'s coordinator knows of it, wherever it is (another broker's,
        on a cluster); raises retriably when it cannot be reached."""
        self._check_open()
        return _LocalCoordinators(self).lookup_producer(
            LookupProducer(producer_id, producer_generation)
        )

    def settle_offsets_holder_here(self, request: SettleOffsetsHolder) -> None:
        """KIP-447's fence at the holder's coordinator, on this broker (the transport's
        server side calls this; ``TransactionCoordinators.settle_offsets_holder``)."""
        self._check_open()
        settle_holder(self._coordinator_for_id(request.holder_id), request)

    def commit_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        wait_for_applied: bool = False,
        attempts: Iterable[str] | None = None,
        batches_written: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """Commit: returns once PREPARE_COMMIT is durable (or applied, with ``wait_for_applied``).

        ``attempts`` (None: all) names the task attempts whose batches are applied;
        batches of other attempts are dropped. ``batches_written`` (None: not checked): how
        many batches the producer saw written to each partition; a partition whose journal
        holds fewer refuses the commit (TransactionDataMissingError: abort).
        """
        self._check_open()
        self._coordinator_of_transaction(transaction_id, producer_id).commit(
            transaction_id,
            producer_id,
            producer_generation,
            wait_for_applied,
            attempts,
            batches_written,
        )

    def abort_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        wait_for_applied: bool = False,
    ) -> None:
        """Abort: returns once PREPARE_ABORT is durable (or applied, with ``wait_for_applied``)."""
        self._check_open()
        self._coordinator_of_transaction(transaction_id, producer_id).abort(
            transaction_id, producer_id, producer_generation, wait_for_applied
        )

    # --- consuming -----------------------------------------------------------------------------

    # --- replication (a cluster broker; engine.replication) -----------------------------

    def _notify_replica_data(self) -> None:
        with self._replica_data:
            self._replica_data.notify_all()

    def _cluster_partition(self, topic_partition: TopicPartition) -> Partition:
        """The partition, opened on first use: the cluster may name a topic another broker
        created after this one started."""
        if self.replication is None:
            raise InvalidConfigError("this broker is not part of a cluster (no broker_id)")
        partition = self._partitions.get(topic_partition)
        if partition is None:
            with self._admin_lock:
                partition = self._partitions.get(topic_partition)
                if partition is None:
                    topic = self.metadata.get_topic(topic_partition.topic)
                    if not 0 <= topic_partition.partition < topic.partitions:
                        raise UnknownTopicOrPartitionError(f"no partition {topic_partition}")
                    partition = self._open_partition(topic_partition, topic.config)
        return partition

    def take_partition_role(
        self,
        topic_partition: TopicPartition,
        leader_id: int,
        leader_epoch: int,
        replicas: Iterable[int],
        isr: Mapping[int, int],
    ) -> None:
        """The cluster's word on a partition: ``leader_id`` leads it at ``leader_epoch``
        with ``isr`` ({broker id: broker epoch}). This broker leads or follows accordingly
        (stale words are ignored: ``partition_role``)."""
        assert self.replication is not None
        topic_partition = TopicPartition(*topic_partition)
        partition = self._cluster_partition(topic_partition)
        role = Role.LEADER if leader_id == self.replication.broker_id else Role.FOLLOWER
        partition.take_role(
            PartitionRole(role, leader_id, leader_epoch),
            tuple(replicas),
            dict(isr),
            now_ms(),
        )
        slots: CoordinatorSlots[Any] | None = None
        if topic_partition.topic == TXN_JOURNAL_TOPIC:
            slots = self._coordinator_slots
        elif topic_partition.topic == OFFSETS_TOPIC:
            slots = self._group_slots
        if slots is not None and topic_partition.partition < slots.count:
            if role is Role.LEADER:
                slots.lead(topic_partition.partition, leader_epoch)
            else:
                slots.follow(topic_partition.partition)

    def replica_fetch(self, request: ReplicaFetch) -> list[FetchedPartition]:
        """A follower's fetch (leader side): every partition's answer, waiting up to
        ``max_wait_ms`` while none has anything new for it (a long poll, woken by appends
        and high-watermark moves)."""
        self._check_open()
        deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000
        while True:
            answers = [
                self._replica_read(request, wanted, now_ms()) for wanted in request.partitions
            ]
            # Followers learn a moved high watermark with their next batches, or when the
            # poll ends: only batches, errors and divergences end it early.
            news = any(
                answer.records or answer.error or answer.diverging is not None for answer in answers
            )
            remaining_s = deadline - time.monotonic()
            if news or remaining_s <= 0 or self._closed:
                return answers
            with self._replica_data:
                self._replica_data.wait(min(remaining_s, 0.1))

    def _replica_read(
        self, request: ReplicaFetch, wanted: ReplicaFetchPartition, now: int
    ) -> FetchedPartition:
        partition = self._partitions.get(TopicPartition(*wanted.topic_partition))
        if partition is None:
            return FetchedPartition(
                wanted.topic_partition,
                error=UnknownTopicOrPartitionError.__name__,
                message=f"this broker holds no partition {wanted.topic_partition}",
            )
        return partition.replica_read(
            request.replica_id, request.broker_epoch, wanted, request.max_bytes, now
        )

    def replica_fetch_request(self, leader_id: int, max_wait_ms: int = 500) -> ReplicaFetch | None:
        """What this follower fetches from ``leader_id`` now (None: it follows it nowhere)."""
        assert self.replication is not None
        positions = []
        for partition in list(self._partitions.values()):
            if partition.role.role is Role.FOLLOWER and partition.role.leader_id == leader_id:
                positions.extend(partition.replica_fetch_positions())
        if not positions:
            return None
        # Rotate the order: a leader caps its answer's bytes, and the partitions it would
        # leave out are always the last ones.
        self._fetch_rotation = (self._fetch_rotation + 1) % len(positions)
        positions = positions[self._fetch_rotation :] + positions[: self._fetch_rotation]
        return ReplicaFetch(
            self.replication.broker_id,
            self.broker_epoch,
            tuple(positions),
            max_wait_ms=max_wait_ms,
        )

    broker_epoch = -1  # the cluster registration's (KIP-380); set by the cluster member
    _fetch_rotation = 0

    def apply_replica_fetch(self, leader_id: int, fetched: Iterable[FetchedPartition]) -> None:
        """The answers of ``leader_id`` to this follower's fetch. A partition that follows
        another leader by now drops its answer (``Partition.apply_fetched``); refused
        partitions are the fetcher's to report."""
        for answer in fetched:
            partition = self._partitions.get(TopicPartition(*answer.topic_partition))
            if partition is not None and not answer.error:
                partition.apply_fetched(answer, leader_id)

    def isr_changes_due(
        self, registered_epochs: Mapping[int, int]
    ) -> list[tuple[TopicPartition, int, IsrChange]]:
        """The ISR changes this broker's led partitions should write now (KIP-497), each with
        the leader epoch it was decided at; each is marked proposed until
        ``isr_change_done``."""
        changes = []
        now = now_ms()
        for topic_partition, partition in list(self._partitions.items()):
            if partition.role.role is Role.LEADER:
                change = partition.isr_change_due(now, registered_epochs)
                if change is not None:
                    changes.append((topic_partition, partition.role.leader_epoch, change))
        return changes

    def isr_change_done(
        self, topic_partition: TopicPartition, isr: Mapping[int, int] | None
    ) -> None:
        partition = self._partitions.get(TopicPartition(*topic_partition))
        if partition is not None:
            partition.isr_change_done(isr)

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
    ) -> FetchResult:
        self._check_open()
        if max_bytes <= 0:
            raise InvalidConfigError(f"max_bytes must be > 0, got {max_bytes}")
        return self._partition(topic, partition).fetch(offset, max_bytes, max_wait_ms, min_bytes)

    def list_offset(self, topic: str, partition: int, spec: str | int) -> int:
        """``"earliest"``, ``"latest"`` or a timestamp in ms (first offset at or after it).

        "latest", and a timestamp after every committed record, answer the high
        watermark: a consumer never learns an offset it may not read.
        """
        target = self._partition(topic, partition)
        target.check_serves_clients()
        if spec == "earliest":
            return target.log.log_start_offset
        high_watermark = target.high_watermark.value
        if spec == "latest":
            return high_watermark
        if isinstance(spec, int) and not isinstance(spec, bool):
            found = target.log.offset_for_timestamp(spec)
            return high_watermark if found is None else min(found, high_watermark)
        raise InvalidConfigError(
            f"offset spec {spec!r}: use 'earliest', 'latest' or a timestamp in ms"
        )

    def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        member: GroupMemberRef = OUTSIDE_ANY_GROUP,
    ) -> None:
        """A plain (non-transactional) offset commit; from a group's ``member``, or from
        outside the group (only while it has no members: ``engine/groups``)."""
        self._check_open()
        if not group_id:
            raise InvalidConfigError("group id must not be empty")
        wanted = {TopicPartition(*p): int(o) for p, o in offsets.items()}
        if not wanted:
            return
        target = self._group_coordinator(group_id)
        with self.consumer_groups.committing(group_id, member, wanted):
            self.offset_fence.check_plain_commit(group_id, wanted)
            # a cluster leader answers once the in-sync replicas hold it (acks=all); folded
            # to the log end, so commits answered out of order still fold in offset order
            self._append_group_records(target, build_offsets_batch(group_id, wanted))

    def group_heartbeat(self, call: GroupHeartbeat) -> GroupHeartbeatAnswer:
        """A member's heartbeat at its group's coordinator (join, leave, keep-alive)."""
        self._check_open()
        return self.consumer_groups.heartbeat(call)

    def list_groups(self) -> list[GroupListing]:
        """The groups this broker coordinates (a cluster client asks every broker)."""
        self._check_open()
        return self.consumer_groups.list_groups()

    def describe_group(self, group_id: str) -> GroupDescription:
        self._check_open()
        return self.consumer_groups.describe_group(group_id)

    def delete_group(self, group_id: str) -> None:
        self._check_open()
        self.consumer_groups.delete_group(group_id)

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        self._check_open()
        self._group_coordinator(group_id)
        return self.group_offsets.fetch(group_id, partitions)

    def _observe_offsets(self, partition: Partition, first_offset: int, next_offset: int) -> None:
        """Fold offsets records just written into the view; in a cluster only while this
        broker coordinates the partition's groups (a load folds them otherwise)."""
        slots = self._group_slots
        with self._offsets_load_lock:
            if slots is not None and not slots.is_active(partition.topic_partition.partition):
                return
            self.group_offsets.observe(records_between(partition, first_offset, next_offset))

    # --- administration ---------------------------------------------------------------------------

    def list_transactions(self) -> list[TransactionDescription]:
        found = []
        for coordinator in self.coordinators:
            found.extend(coordinator.list_transactions())
        return sorted(found, key=lambda t: t.transaction_id)

    def admin_abort_transaction(self, transaction_id: int) -> None:
        self._check_open()
        coordinator_index = coordinator_partition_of(transaction_id)
        coordinator = (
            self._coordinator_at(coordinator_index)
            if coordinator_index < self.metadata.journal_partitions
            else None
        )
        # One answer for every id that is not in flight, whichever coordinator its low bits name.
        if coordinator is None or coordinator.transaction(transaction_id) is None:
            raise UnknownTransactionError(
                f"transaction {transaction_id} is not in flight (never begun, already "
                "completed, or not issued by this broker); list those in flight with "
                "`twinlog txn list` (Admin.list_transactions())"
            )
        coordinator.admin_abort(transaction_id)

    def describe_producers(self, topic: str, partition: int) -> list[ProducerDescription]:
        return self._partition(topic, partition).describe_producers()

    def transactional_id_of(self, producer_id: int) -> str | None:
        """The transactional id a producer id belongs to (None: unknown); the server's ACLs
        need it. Producer ids survive restarts and re-inits, so this answer does too."""
        coordinator_index = coordinator_partition_of(producer_id)
        if producer_id < 0 or coordinator_index >= self.metadata.journal_partitions:
            return None
        if self.transaction_coordinators is None:  # every coordinator is here
            return self._coordinator_at(coordinator_index).transactional_id_of(producer_id)
        # A cluster: the producer's coordinator may be another broker. An id is issued for
        # one transactional id for good, so a known answer is kept (a bounded cache: a
        # partition leader checks every batch's producer id).
        known = self._issued_transactional_ids.get(producer_id)
        if known is not None:
            return known
        unknown_at = self._unknown_producer_ids.get(producer_id)
        if unknown_at is not None and time.monotonic() - unknown_at < UNKNOWN_ID_KEPT_S:
            return None  # batches with made-up ids do not each cost a call to another broker
        found = self.lookup_producer(producer_id, 0).transactional_id
        if found is not None:
            self._issued_transactional_ids.put(producer_id, found)
        else:
            self._unknown_producer_ids.put(producer_id, time.monotonic())
        return found

    # --- observability ---------------------------------------------------------------------------

    def stats(self) -> BrokerStats:
        """Figures for an operator (``broker_stats``): read-only, costs a walk of the state."""
        self._check_open()
        with self._admin_lock:  # topics come and go under it
            partitions = list(self._partitions.values())
        return collect_stats(
            self.coordinators,
            partitions,
            self.journal,
            self.group_offsets.committed(),
            self.transaction_timings,
        )

    # --- used by tests and tools -------------------------------------------------------------------

    def expire_transactions(self, now: int | None = None) -> list[int]:
        """Run the timeout check now (the background task runs it every interval)."""
        aborted = []
        for coordinator in self.coordinators:
            aborted.extend(coordinator.expire(now if now is not None else now_ms()))
        return aborted


__all__ = ["Broker", "TransactionEvent"]
