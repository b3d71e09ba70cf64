"""Topics: create, delete, list and describe them; a cluster broker's internal topics.

Creating a topic checks its name, configuration (``LogConfig``), replication factor and
the process's open-files limit before anything is written, removes what a deleted topic
of the same name left, records it in the metadata store and opens its partitions.
Deleting one closes its partitions' sends, ends the open transactions that touch it
(``topic_deletion``), then removes it from the metadata and its partitions from disk.

A cluster broker also creates ``__txn_journal`` and ``__consumer_offsets`` once enough
brokers are live for their replication factor (``ensure_internal_topics``, a scheduler
task every second until both exist).

Thread rule: create and delete run under the broker's admin lock (topics come and go
under it); ``ensure_internal_topics`` runs on the scheduler's thread; reads from any
thread.
"""

from __future__ import annotations

import contextlib
import logging
import resource
import shutil
import threading
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path

from twinlog.engine.base.errors import (
    InvalidConfigError,
    NotEnoughResourcesError,
    NotLeaderOrFollowerError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.base.types import (
    REPLICATION_FACTOR_SETTING,
    PartitionDescription,
    TopicDescription,
    TopicPartition,
)
from twinlog.engine.base.wording import counted
from twinlog.engine.broker.config import BrokerConfig
from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC, offsets_topic_config
from twinlog.engine.broker.internal_topics import (
    INTERNAL_TOPIC_PREFIX,
    TXN_JOURNAL_TOPIC,
    TXN_JOURNAL_TOPIC_CONFIG,
    is_internal,
    refuse_internal,
)
from twinlog.engine.broker.membership import Membership
from twinlog.engine.broker.metadata_store import MetadataStore
from twinlog.engine.broker.partition_manager import PartitionManager
from twinlog.engine.broker.scheduler import ScheduledTask
from twinlog.engine.broker.topic_deletion import end_transactions_touching
from twinlog.engine.broker.topic_registry import (
    PARTITIONS_MAX,
    check_growth,
    validate_topic_name,
)
from twinlog.engine.log.config import altered_topic_config
from twinlog.engine.transactions.coordinator import Coordinator
from twinlog.journal import JournalLogs

log = logging.getLogger(__name__)

INTERNAL_TOPICS_CHECK_MS = 1_000  # a cluster broker creates __txn_journal once enough are live

# An idle partition holds no descriptor (its segments open theirs on first use); a
# written one holds four in its data log (the segment twice, two indexes) and up to four
# in its journal log. One per partition leaves room for a quarter of them written at
# once; past that, the append that finds no descriptor left is refused
# (NotEnoughResourcesError) and nothing is half-written.
FILES_PER_PARTITION = 1
FILES_RESERVED = 256  # sockets, LMDB, transaction journals, ...


class TopicManager:
    def __init__(
        self,
        data_dir: Path,
        config: BrokerConfig,
        metadata: MetadataStore,
        journal: JournalLogs,
        partitions: PartitionManager,
        membership: Callable[[], Membership],
        offsets_partitions: int,
        coordinators: Callable[[], list[Coordinator]],
        admin_lock: threading.RLock,
        is_closed: Callable[[], bool],
    ) -> None:
        """Called once, by the broker's start-up, once its partitions are open."""
        self._data_dir = data_dir
        self._config = config
        self._metadata = metadata
        self._journal = journal
        self._partitions = partitions
        self._membership = membership  # gives a new topic's partitions their roles
        self._offsets_partitions = offsets_partitions
        self._coordinators = coordinators  # the active ones, as they are at each call
        self._admin_lock = admin_lock
        self._is_closed = is_closed
        # internal topics not seen yet (ensure_internal_topics)
        self._internal_topics_missing = {TXN_JOURNAL_TOPIC, OFFSETS_TOPIC}

    def create(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> TopicDescription:
        """A new topic: its name, configuration and partition count checked before anything
        is written, leftovers of a deleted namesake removed, its partitions opened."""
        description = self._create(name, partitions, config)
        log.info("created topic %s with %s", name, counted(partitions, "partition"))
        return description

    def auto_create(
        self, name: str, creating: Callable[[], AbstractContextManager[object]] | None = None
    ) -> TopicDescription:
        """``name`` described, created first when it does not exist (a producer's first use:
        Kafka's auto.create.topics.enable) with ``num_partitions`` partitions and
        ``default_replication_factor`` replicas. ``creating`` wraps the creation only (the
        door's permission check and audit line). A topic created meanwhile by another
        caller or broker is described as it is: that race is no error.

        UnknownTopicOrPartitionError when it does not exist and is not created here (the
        setting is off, or the name is internal); InvalidConfigError for a name no topic
        may have."""
        try:
            return self.describe(name)
        except UnknownTopicOrPartitionError:
            pass
        validate_topic_name(name)
        if is_internal(name):
            raise UnknownTopicOrPartitionError(
                f"topic {name!r} does not exist; internal topics (names starting "
                f"{INTERNAL_TOPIC_PREFIX!r}) are never created on first use: choose another name"
            )
        if not self._config.auto_create_topics_enable:
            raise UnknownTopicOrPartitionError(
                f"topic {name!r} does not exist, and this broker does not create topics on "
                f"first use (auto.create.topics.enable=false): create it first (twinlog topics "
                f"create {name})"
            )
        partitions = self._config.num_partitions
        factor = self._config.default_replication_factor
        try:
            with creating() if creating is not None else contextlib.nullcontext():
                description = self._create(name, partitions, None)
        except TopicExistsError:  # created meanwhile (another producer, another broker)
            return self.describe(name)
        log.info(
            "topic %s auto-created with %s, replication factor %d (auto.create.topics.enable)",
            name,
            counted(partitions, "partition"),
            factor,
        )
        return description

    def _create(
        self, name: str, partitions: int, config: Mapping[str, str] | None
    ) -> TopicDescription:
        refuse_internal(name, "create")
        config = dict(config or {})
        replication_factor = self._replication_factor(config)  # taken out of the config
        self._membership().check_replication_factor(name, replication_factor)
        self._partitions.log_config(config)  # refuse a bad config before any write
        with self._admin_lock:
            self._check_open_files(partitions)
            self._remove_leftovers(name, partitions)
            self._metadata.add_topic(
                name, partitions, config, replication_factor=replication_factor
            )
            for partition_index in range(partitions):
                self._partitions.open(TopicPartition(name, partition_index), config)
            self._membership().topic_created(name, partitions)
        return self.describe(name)

    def _replication_factor(self, config: dict[str, str]) -> int:
        """``replication.factor`` of a new topic, removed from ``config`` (it is the
        cluster's, not the log's); the metadata store refuses one above its live brokers."""
        given = config.pop(REPLICATION_FACTOR_SETTING, config.pop("replication_factor", None))
        try:
            factor = self._config.default_replication_factor if given is None else int(given)
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
        if name in self._metadata.topics() or not isinstance(partition_count, int):
            return  # refused by the registry below
        for partition_index in range(min(max(partition_count, 0), PARTITIONS_MAX)):
            leftover = self._data_dir / "logs" / str(TopicPartition(name, partition_index))
            if leftover.exists():
                log.warning("removing %s, left by a deleted topic of the same name", leftover)
                shutil.rmtree(leftover)
            # What LMDB applied from that partition's journal log (a crash before the
            # delete told it) must go too: the new partition's journal log starts at 0.
            self._journal.delete_partition(str(TopicPartition(name, partition_index)))

    def _check_open_files(self, partition_count: object) -> None:
        """Refuse a topic whose partitions would exhaust the process's open-files limit."""
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        wanted = partition_count if isinstance(partition_count, int) and partition_count > 0 else 0
        needed = (self._partitions.count() + wanted) * FILES_PER_PARTITION + FILES_RESERVED
        if limit != resource.RLIM_INFINITY and needed > limit:
            raise NotEnoughResourcesError(
                f"{wanted} more partitions would need about {needed} open files, above this "
                f"process's limit of {limit} (ulimit -n); raise the limit or use fewer partitions"
            )

    def grow(self, name: str, partitions: int, *, validate_only: bool = False) -> TopicDescription:
        """Give ``name`` more partitions, ``partitions`` in all (Kafka's CreatePartitions):
        the new ones are opened here and given their roles (the sole member leads them; on
        a cluster the controller assigns their replicas, as a new topic's). Records with a
        key may land in another partition from now on: the default partitioner hashes the
        key over the partition count. ``validate_only``: every check, nothing changed."""
        refuse_internal(name, "add partitions to")
        with self._admin_lock:
            had = self._metadata.get_topic(name).partitions  # (a store may grow that object)
            check_growth(name, had, partitions)
            self._check_open_files(partitions - had)
            if validate_only:
                return self.describe(name)
            grown = self._metadata.grow_topic(name, partitions)
            for partition_index in range(had, grown.partitions):
                self._partitions.open(TopicPartition(name, partition_index), grown.config)
            self._membership().topic_created(name, grown.partitions, first=had)
        log.info("topic %s grown from %s to %d", name, counted(had, "partition"), partitions)
        return self.describe(name)

    def alter_config(
        self,
        name: str,
        set_values: Mapping[str, str],
        deleted: Iterable[str] = (),
        *,
        validate_only: bool = False,
    ) -> TopicDescription:
        """Change ``name``'s settings: ``set_values`` set, ``deleted`` back to the broker's
        defaults (Kafka's IncrementalAlterConfigs). Checked whole before anything is written;
        applied here at once, and by a cluster's other brokers as they see the change."""
        refuse_internal(name, "change the settings of")
        deleted = list(deleted)
        for key in [*set_values, *deleted]:
            if key in (REPLICATION_FACTOR_SETTING, "replication_factor"):
                raise InvalidConfigError(
                    f"{key} cannot change with the topic's settings: a partition's replicas "
                    "change by reassignment"
                )
        with self._admin_lock:
            current = self._metadata.get_topic(name).config
            config = altered_topic_config(current, set_values, deleted)
            self._partitions.log_config(config)  # refuse a bad value before any write
            if validate_only:
                return self.describe(name)
            self._metadata.set_topic_config(name, config)
            self._partitions.reconfigure_topic(name, config)
        log.info("topic %s settings changed to %s", name, config or "the broker's defaults")
        return self.describe(name)

    def apply_config(self, name: str) -> int:
        """A cluster's topic settings changed elsewhere: apply what the metadata says to
        this broker's partitions of ``name``; how many changed."""
        with self._admin_lock:
            try:
                config = self._metadata.get_topic(name).config
            except UnknownTopicOrPartitionError:
                return 0  # deleted meanwhile
            return self._partitions.reconfigure_topic(name, config)

    def delete(self, name: str) -> None:
        """Delete a topic: sends to it closed, its open transactions ended, its partitions
        closed and their directories and journal logs removed."""
        refuse_internal(name, "delete")
        with self._admin_lock:
            topic = self._metadata.get_topic(name)
            gates = [
                self._partitions.partition(TopicPartition(name, index)).send_gate
                for index in range(topic.partitions)
            ]
            for gate in gates:
                gate.close()
            try:  # topic_deletion.py: its open transactions must not outlive it
                end_transactions_touching(name, self._coordinators())
            except BaseException:
                for gate in gates:
                    gate.reopen()
                raise
            self._metadata.remove_topic(name)
            for partition_index in range(topic.partitions):
                partition = self._partitions.remove(TopicPartition(name, partition_index))
                partition.close()
                # The journal log goes with the directory: LMDB forgets what it applied
                # from it, or a topic created again would find a log shorter than that.
                self._journal.delete_partition(partition.name)
                shutil.rmtree(partition.directory, ignore_errors=True)
        log.info("deleted topic %s", name)

    def drop_replica(self, topic_partition: TopicPartition, leader_epoch: int) -> bool:
        """This broker is no longer a replica of ``topic_partition`` (a reassignment moved
        it, at ``leader_epoch``): its copy stops, is closed, and its directory, journal log
        and LMDB rows are removed. False when it held none. Its open transactions are not
        ended, as a deletion ends them: they go on with the partition's new replicas,
        which hold their journal entries."""
        with self._admin_lock:
            partition = self._partitions.step_out(topic_partition, leader_epoch)
            if partition is None:
                return False
            # Sends that raced the step-out finish (stepped out, they fail as not led
            # here); later ones are told to find the leader, not that nothing exists.
            partition.send_gate.close(
                lambda: NotLeaderOrFollowerError(
                    f"{topic_partition} moved away from this broker (a reassignment); "
                    "refresh metadata and send to its leader"
                )
            )
            self._partitions.remove(topic_partition)
            partition.close()
            self._journal.delete_partition(partition.name)
            shutil.rmtree(partition.directory, ignore_errors=True)
        log.info("%s: this broker is no longer a replica; its copy is removed", topic_partition)
        return True

    def names(self) -> list[str]:
        """Every topic but the internal ones, by name."""
        return sorted(name for name in self._metadata.topics() if not is_internal(name))

    def partition_counts(self) -> dict[str, int]:
        """Every topic a group may subscribe to, with its partition count."""
        return {
            name: topic.partitions
            for name, topic in self._metadata.topics().items()
            if not is_internal(name)
        }

    def describe(self, name: str) -> TopicDescription:
        topic = self._metadata.get_topic(name)
        pending = self._journal.statistics().pending_by_partition
        partitions = []
        for partition_index in range(topic.partitions):
            partition = self._partitions.partition(TopicPartition(name, partition_index))
            entries, size_bytes = pending.get(partition.name, (0, 0))
            partitions.append(
                PartitionDescription(
                    partition=partition_index,
                    log_start_offset=partition.log.log_start_offset,
                    log_end_offset=partition.readable_end,  # what consumers may read
                    journal_entries_pending=entries,
                    journal_bytes_pending=size_bytes,
                )
            )
        return TopicDescription(name, tuple(partitions), dict(topic.config), topic.topic_id)

    # --- the internal topics (CLUSTER.md §3.5) ----------------------------------------------

    def _ensure_internal_topic(self, name: str, partitions: int, config: dict[str, str]) -> bool:
        """Create internal topic ``name`` (RF ``default_replication_factor``, Kafka's
        transaction.state.log / offsets.topic replication factors) if no broker has: refused
        while fewer brokers are live than that, so the ``internal-topics`` task tries again
        every second. True once it exists (the caller stops asking); reads that one topic."""
        try:
            existing = self._metadata.get_topic(name)
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
            self._metadata.add_topic(
                name, partitions, config, replication_factor=self._config.default_replication_factor
            )
            log.info(
                "created %s: %s, replication factor %d",
                name,
                counted(partitions, "partition"),
                self._config.default_replication_factor,
            )
        except TopicExistsError:
            pass  # another broker created it first
        except InvalidConfigError as error:  # too few live brokers yet
            log.info("%s not created yet: %s", name, error)
        return False

    def cluster_tasks(self) -> list[ScheduledTask]:
        """The scheduler task that creates the internal topics once enough brokers are
        live (on one node they exist from the first open: it stops asking at once)."""
        return [
            ScheduledTask(
                "internal-topics", lambda: INTERNAL_TOPICS_CHECK_MS, self.ensure_internal_topics
            )
        ]

    def ensure_internal_topics(self) -> None:
        """The periodic check that the internal topics exist (also the first open's step)."""
        if self._is_closed() or not self._internal_topics_missing:
            return
        missing = self._internal_topics_missing
        if TXN_JOURNAL_TOPIC in missing and self._ensure_internal_topic(
            TXN_JOURNAL_TOPIC, self._metadata.journal_partitions, dict(TXN_JOURNAL_TOPIC_CONFIG)
        ):
            missing.discard(TXN_JOURNAL_TOPIC)
        if OFFSETS_TOPIC in missing and self._ensure_internal_topic(
            OFFSETS_TOPIC,
            self._offsets_partitions,
            offsets_topic_config({}, self._config.offsets_segment_bytes),
        ):
            missing.discard(OFFSETS_TOPIC)


__all__ = ["TopicManager"]
