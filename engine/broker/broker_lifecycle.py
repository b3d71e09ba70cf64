"""The broker's start-up and closing: the parts opened in order, closed whatever fails.

Start-up, in order (each step needs the one before):

    1. topics and ids            the metadata store and the id source
    2. local data journal        open LMDB
    3. partitions                (an old ``txn/N`` moved into ``__txn_journal`` once) each
                                 data log recovered, its journal log replayed into LMDB;
                                 the internal topics created if missing (on a cluster,
                                 once enough brokers are live)
    4. group coordinators        one slot per __consumer_offsets partition
    5. coordinators              one slot per __txn_journal partition
    6. roles                     the sole member leads every partition (finishing half-done
                                 copies, J6) and waits for every slot to load (replay from
                                 the checkpoint, redo the prepared); a cluster broker's
                                 roles come once its ZooKeeper member joins
    7. background threads        the scheduler's timeouts, checkpoints (and the journal
                                 purge below the coordinators' low watermark), retention,
                                 compaction and log flush

Every part is set once, here, in that order; ``_close_opened`` closes what a failed
start-up had opened, so the next start is not refused.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, cast

from twinlog.engine.base.atomic_file import probe_space
from twinlog.engine.base.errors import DiskFullError, InvalidConfigError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.base.wording import counted
from twinlog.engine.broker.config import BrokerConfig
from twinlog.engine.broker.consumer_groups import ConsumerGroups, append_group_records
from twinlog.engine.broker.coordinator_manager import CoordinatorManager
from twinlog.engine.broker.data_dir_format import check_data_dir_format
from twinlog.engine.broker.group_coordinators import GroupCoordinators
from twinlog.engine.broker.group_offset_fencing import GroupOffsetFence
from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC, GroupOffsets, offsets_topic_config
from twinlog.engine.broker.local_metadata_store import LocalMetadataStore
from twinlog.engine.broker.membership import Membership, RoleTaker, SoleMember
from twinlog.engine.broker.metadata_store import MetadataStore
from twinlog.engine.broker.partition_manager import PartitionManager
from twinlog.engine.broker.scheduler import Scheduler, broker_tasks
from twinlog.engine.broker.seam_adapters import (
    CurrentPartitionLeaders,
    LocalCoordinators,
    LocalPartitionLeaders,
    SeamHost,
)
from twinlog.engine.broker.topic_manager import TopicManager
from twinlog.engine.broker.txn_journal_migration import migrate_txn_journals
from twinlog.engine.records.decompression_budget import DecompressionBudget
from twinlog.engine.replication.replication_settings import ReplicationSettings
from twinlog.engine.transactions.id_allocator import LocalIdSource
from twinlog.engine.transactions.id_source import IdSource
from twinlog.engine.transactions.partition_calls import (
    PartitionLeaders,
    TransactionCoordinators,
)
from twinlog.engine.transactions.transaction_timings import TransactionTimings
from twinlog.journal import JournalLogs, LocalJournal

log = logging.getLogger(__name__)


def prepare_data_dir(directory: Path) -> Path:
    """``directory``, created if missing; InvalidConfigError, saying what to do, when this
    user cannot use it."""
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
    return directory


class BrokerLifecycle:
    """The half of ``Broker`` that opens and closes its parts (``Broker.__init__`` sets
    the state below; ``_start`` sets each part once)."""

    data_dir: Path
    config: BrokerConfig
    broker_id: int
    replication: ReplicationSettings
    membership: Membership
    scheduler: Scheduler
    _decompression_budget: DecompressionBudget
    transaction_timings: TransactionTimings
    transaction_coordinators: TransactionCoordinators
    _sole_member: bool
    _given_metadata: MetadataStore | None
    _given_ids: IdSource | None
    _given_coordinator_ids: Any
    _admin_lock: threading.RLock
    _closed: bool
    # the parts
    metadata: MetadataStore
    ids: IdSource
    journal: JournalLogs
    partition_manager: PartitionManager
    local_partition_leaders: PartitionLeaders
    partition_leaders: PartitionLeaders
    topic_manager: TopicManager
    group_offsets: GroupOffsets
    group_coordinators: GroupCoordinators
    offset_fence: GroupOffsetFence
    consumer_groups: ConsumerGroups
    coordinator_manager: CoordinatorManager

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
        # The Broker this is half of, as the seam's adapters and the sole member see it.
        host = cast(SeamHost, self)
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
        # 3. partitions (data log recovery; each replays its journal log into LMDB); a
        # single node's journals of before it was a cluster of one move into __txn_journal
        migrate_txn_journals(self.data_dir, self.metadata, self._given_metadata is None)
        self.partition_manager = PartitionManager(
            self.data_dir,
            config,
            self.journal,
            self.metadata,
            LocalCoordinators(host),
            self.replication,
            self._admin_lock,
            lambda: self._closed,
        )
        self.local_partition_leaders: PartitionLeaders = LocalPartitionLeaders(
            self.partition_manager,
            config.accept_journal_loss,
            lambda partition, first, end: self.group_coordinators.observe(partition, first, end),
            lambda transaction_id, index: self.group_coordinators.settled(transaction_id, index),
        )
        self.partition_leaders: PartitionLeaders = self.local_partition_leaders
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
                self.partition_manager.open(TopicPartition(name, partition_index), topic.config)
        self.topic_manager = TopicManager(
            self.data_dir,
            config,
            self.metadata,
            self.journal,
            self.partition_manager,
            lambda: self.membership,
            offsets_partitions,
            lambda: self.coordinator_manager.active,
            self._admin_lock,
            lambda: self._closed,
        )
        # __txn_journal and __consumer_offsets: on one node created now (the first open);
        # on a cluster once enough brokers are live (a scheduler task asks every second)
        self.topic_manager.ensure_internal_topics()
        # 4. group offsets: each offsets partition's folded in as this broker comes to
        # lead it (group_coordinators)
        self.group_offsets = GroupOffsets(offsets_partitions)
        # Set while this broker knows every partition's role. On one node at once (its sole
        # member leads everything below); a served cluster broker clears it before its
        # doors open and its cluster member sets it again after its first full read of
        # ZooKeeper (in-process brokers, given their roles by hand, keep it set). While it
        # is clear, "not the coordinator" is not known yet (CoordinatorManager.at).
        self.roles_known = threading.Event()
        self.roles_known.set()
        self.group_coordinators = GroupCoordinators(
            self.group_offsets,
            self.partition_manager,
            self.journal,
            lambda partition_index: self.consumer_groups.drop_partition(partition_index),
            self.scheduler.is_stopping,
            self.roles_known.is_set,
        )
        self.offset_fence = GroupOffsetFence(
            self.group_offsets, LocalCoordinators(host).settle_offsets_holder
        )
        self._append_group_records = append_group_records(self.group_coordinators.observe)
        self.consumer_groups = ConsumerGroups(
            self.group_offsets,
            self.offset_fence,
            self.group_coordinators.coordinator_of,
            self._append_group_records,
            self.topic_manager.partition_counts,
            config.group_heartbeat_interval_ms,
        )
        # 5. coordinators: each loads as this broker comes to lead its __txn_journal
        # partition (coordinator_slots): replay from the checkpoint, redo the prepared
        # decisions; journal leftovers below the coordinators' low watermark are purged by
        # the checkpoint rounds
        self.coordinator_manager = CoordinatorManager(
            self.data_dir,
            self.metadata,
            self.ids,
            self._given_coordinator_ids,
            CurrentPartitionLeaders(host),
            self.offset_fence,
            self.transaction_timings,
            self.partition_manager,
            self.scheduler.is_stopping,
            self.roles_known.is_set,
        )
        # 6. roles: on one node its sole member leads everything now, and the open waits
        # until every coordinator has loaded; a cluster broker waits for its ZooKeeper
        # member to join (``rpc.server``)
        if self._sole_member:
            sole_member = SoleMember(cast(RoleTaker, host))
            self.membership = sole_member
            sole_member.start()
        # 7. background work
        self.scheduler.start(
            [
                *broker_tasks(
                    config,
                    lambda: self.coordinator_manager.active,
                    self.journal,
                    self.coordinator_manager.low_watermark,
                    partitions=self.partition_manager.all,
                    should_stop=self.scheduler.is_stopping,
                    expire_group_members=self.consumer_groups.membership.expire,
                    decompression_budget=self._decompression_budget,
                    write_marks_left=self.partition_manager.marks_left.write_all,
                ),
                *self.topic_manager.cluster_tasks(),
                *self.partition_manager.tasks(),
            ]
        )
        log.info(
            "broker %d open in %s: %s, %s, %s active, %.0f ms",
            self.broker_id,
            self.data_dir,
            counted(len(self.metadata.topics()), "topic"),
            counted(self.partition_manager.count(), "partition"),
            counted(len(self.coordinator_manager.active), "coordinator"),
            (time.monotonic() - started) * 1000,
        )

    def _close_opened(self) -> None:
        """Close every part that was opened, even when one fails; raise the first error.

        On a full disk a part may fail to save a checkpoint: the others must still be
        closed (the journal's lock released), so the next start is not refused.
        """
        coordinators: CoordinatorManager | None = getattr(self, "coordinator_manager", None)
        partitions: PartitionManager | None = getattr(self, "partition_manager", None)
        if coordinators is not None:
            coordinators.abandon_led()  # nothing more is written; the next leader redoes it
        groups: GroupCoordinators | None = getattr(self, "group_coordinators", None)
        if groups is not None:
            groups.close()
        if partitions is not None:
            # The next start serves up to these at once (a failure is said, not raised).
            partitions.checkpoint_high_watermarks()
        parts: list[Any] = [
            *(partitions.all() if partitions is not None else []),
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


__all__ = ["BrokerLifecycle", "prepare_data_dir"]
