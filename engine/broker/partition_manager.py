"""The broker's partitions: the table, their roles, the followers' fetches and ISR hand-off.

Kafka's ``ReplicaManager``. It opens each partition of ``DATA_DIR/logs/TOPIC-PARTITION``
(``partition``), finds one by its topic and index (``partition(tp)``, the public view
the broker, the seam and the tests use), gives each the role the cluster names
(``take_role``), answers followers' fetches as a leader (``replica_fetch``, a long poll
woken by appends), builds and applies this broker's own fetches as a follower, and
hands led partitions' ISR changes to the cluster member (``isr_changes_due``).

State, and who changes it:
    _partitions   topic partition -> Partition. Added by ``open`` (start-up, topic
                  creation, first use of a topic another broker created: under the
                  broker's admin lock), removed by ``remove`` (topic deletion, under the
                  same lock). Read from any thread without it: dict reads and ``list()``
                  snapshots are atomic in CPython, and a partition removed meanwhile is
                  closed and refuses calls.
Followers' long polls wait in the broker's one purgatory (``replication.long_poll``),
keyed by the partitions they fetch: each append, high-watermark or role move of one of
them wakes the poll.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from pathlib import Path

from twinlog.copier.marks_left import MARKS_LEFT_DELAY_MS, MarksLeft
from twinlog.engine.base.errors import (
    NotLeaderOrFollowerError,
    TwinlogError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.config import BrokerConfig
from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC
from twinlog.engine.broker.high_watermark_checkpoint import HighWatermarkCheckpoint
from twinlog.engine.broker.metadata_store import MetadataStore
from twinlog.engine.broker.partition import Partition
from twinlog.engine.broker.partition_role import NO_LEADER, PartitionRole, Role
from twinlog.engine.broker.promotion_recoveries import PromotionRecoveries
from twinlog.engine.broker.scheduler import ScheduledTask
from twinlog.engine.log import LogConfig
from twinlog.engine.replication.fetch_calls import (
    FetchedPartition,
    LogKind,
    ReplicaFetch,
    new_leadership_key,
)
from twinlog.engine.replication.replica_set import IsrChange
from twinlog.engine.replication.replication_settings import ReplicationSettings
from twinlog.engine.transactions.partition_calls import TransactionCoordinators
from twinlog.engine.transactions.transaction_metadata import now_ms
from twinlog.journal import JournalLogs

log = logging.getLogger(__name__)


class PartitionManager:
    def __init__(
        self,
        data_dir: Path,
        config: BrokerConfig,
        journal: JournalLogs,
        metadata: MetadataStore,
        coordinators: TransactionCoordinators,
        replication: ReplicationSettings,
        admin_lock: threading.RLock,
        is_closed: Callable[[], bool],
    ) -> None:
        """Called once, by the broker's start-up (step 3), before any partition opens."""
        self._data_dir = data_dir
        self._config = config
        self._journal = journal
        self._metadata = metadata
        self._coordinators = coordinators  # each partition's seam to the coordinators
        self.replication = replication
        self._admin_lock = admin_lock
        self._is_closed = is_closed
        self._partitions: dict[TopicPartition, Partition] = {}
        # The partitions' writers holding MARK_APPLIED records for their next copy group
        self.marks_left = MarksLeft()
        # Promoted leaders whose copies an earlier term left are not recovered yet
        self.promotion_recoveries = PromotionRecoveries()
        # Where each partition's high watermark starts at open (the last run's checkpoint)
        self.high_watermarks = HighWatermarkCheckpoint(data_dir)
        self._checkpointed = self.high_watermarks.read()
        # the fetcher threads (one per leader) move it; a lost update only changes which
        # partition comes first in one fetch
        self._fetch_rotation = 0

    # --- the table -------------------------------------------------------------------------

    def log_config(self, topic_config: Mapping[str, str]) -> LogConfig:
        """A topic's log configuration over the broker's defaults; InvalidConfigError if bad."""
        defaults = {
            "segment_bytes": self._config.log_segment_bytes,
            "retention_ms": self._config.log_retention_ms,
            "retention_bytes": self._config.log_retention_bytes,
            "flush_policy": self._config.log_flush_policy,
            "batch_bytes_max": self._config.batch_bytes_max,
            "min_insync_replicas": self.replication.min_insync_replicas,
        }
        return LogConfig.from_mapping({**defaults, **topic_config})

    def reconfigure_topic(self, topic: str, topic_config: Mapping[str, str]) -> int:
        """The topic's settings changed: every partition of it open here takes them (checked
        first: a bad config changes none); how many did."""
        config = self.log_config(topic_config)
        changed = 0
        for partition in [p for p in self.all() if p.topic_partition.topic == topic]:
            if partition.log.config != config:
                partition.reconfigure(config)
                changed += 1
        return changed

    def open(self, topic_partition: TopicPartition, topic_config: Mapping[str, str]) -> Partition:
        """Open (recovering) one partition and add it to the table. Start-up, or a caller
        holding the admin lock."""
        directory = self._data_dir / "logs" / str(topic_partition)
        partition = Partition(
            topic_partition,
            directory,
            self.log_config(topic_config),
            self._journal,
            coordinators=self._coordinators,
            replication=self.replication,
            high_watermark_from=self._checkpointed.pop(topic_partition, None),
            # An offsets partition's new leader reads its APPLYING transactions' offsets
            # as pending until an APPLY settles them (``group_coordinators``), which a
            # COMMITTED transaction never gets again: its MARK_APPLIED is written at once.
            marks_left=None if topic_partition.topic == OFFSETS_TOPIC else self.marks_left,
            # Not an offsets partition: its finished copies must be folded into the group
            # coordinator's view, which only an APPLY does (``promotion_recoveries``).
            promotion_recoveries=(
                None if topic_partition.topic == OFFSETS_TOPIC else self.promotion_recoveries
            ),
        )
        self._partitions[topic_partition] = partition
        return partition

    def checkpoint_high_watermarks(self) -> None:
        """Write every open partition's high watermark to the checkpoint (a task every
        ``replica_high_watermark_checkpoint_interval_ms``, and the close), if it moved."""
        self.high_watermarks.write(
            {tp: partition.high_watermark.value for tp, partition in list(self._partitions.items())}
        )

    def tasks(self) -> list[ScheduledTask]:
        return [
            ScheduledTask(
                "hw-checkpoint",
                lambda: self._config.replica_high_watermark_checkpoint_interval_ms,
                self.checkpoint_high_watermarks,
            ),
            # MARK_APPLIED records no next copy group took within the delay, and those an
            # earlier term left, which a promoted leader's recovery records
            ScheduledTask("applied-marks", lambda: MARKS_LEFT_DELAY_MS, self._write_marks_due),
        ]

    def _write_marks_due(self) -> None:
        self.marks_left.write_due()
        self.promotion_recoveries.run_due(self._is_closed)

    def get(self, topic_partition: TopicPartition) -> Partition | None:
        """The partition if this broker has opened it; None otherwise (never opens one)."""
        return self._partitions.get(topic_partition)

    def get_or_open(self, topic_partition: TopicPartition) -> Partition:
        """The partition, opened on first use: the cluster may name a topic another broker
        created after this one started. UnknownTopicOrPartitionError when the metadata
        has no such partition."""
        partition = self._partitions.get(topic_partition)
        if partition is None:
            with self._admin_lock:
                partition = self._partitions.get(topic_partition)
                if partition is None:
                    topic = self._metadata.get_topic(topic_partition.topic)
                    if not 0 <= topic_partition.partition < topic.partitions:
                        raise UnknownTopicOrPartitionError(
                            f"topic {topic_partition.topic!r} has partitions "
                            f"0..{topic.partitions - 1}, not {topic_partition.partition}"
                        )
                    partition = self.open(topic_partition, topic.config)
        return partition

    def partition(self, topic_partition: TopicPartition) -> Partition:
        """The partition ``topic_partition`` names: UnknownTopicOrPartitionError (saying
        which partitions the topic has, or to create it) when there is none."""
        topic, partition_index = topic_partition
        found = self._partitions.get(TopicPartition(topic, partition_index))
        if found is None and topic in self._metadata.topics():
            # a topic another broker created: opened with no role, it refuses clients
            # (NotLeaderOrFollowerError) until the cluster names its leader
            found = self.get_or_open(TopicPartition(topic, partition_index))
        if found is None:
            known = self._metadata.topics().get(topic)
            if known is not None:
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} has partitions 0..{known.partitions - 1}, "
                    f"not {partition_index}"
                )
            self._metadata.get_topic(topic)  # raises the "create it first" error
        assert found is not None
        return found

    def all(self) -> list[Partition]:
        """A snapshot of every open partition."""
        return list(self._partitions.values())

    def count(self) -> int:
        return len(self._partitions)

    def remove(self, topic_partition: TopicPartition) -> Partition:
        """Take a partition out of the table (topic deletion, under the admin lock); the
        caller closes it."""
        return self._partitions.pop(topic_partition)

    # --- roles --------------------------------------------------------------------------------

    def take_role(
        self,
        topic_partition: TopicPartition,
        leader_id: int,
        leader_epoch: int,
        replicas: Iterable[int],
        isr: Mapping[int, int],
    ) -> Role:
        """The cluster's word on a partition (the cluster member's thread): lead or follow
        ``leader_id`` at ``leader_epoch`` with ``isr`` ({broker id: broker epoch}); stale
        words are ignored (``partition_role``). The role this broker takes."""
        partition = self.get_or_open(topic_partition)
        role = Role.LEADER if leader_id == self.replication.broker_id else Role.FOLLOWER
        partition.take_role(
            PartitionRole(role, leader_id, leader_epoch), tuple(replicas), dict(isr), now_ms()
        )
        return role

    def step_out(self, topic_partition: TopicPartition, leader_epoch: int) -> Partition | None:
        """The cluster's word that this broker is no longer a replica (a reassignment
        moved the partition; ``leader_epoch`` is the state's that says so): a copy it
        leads or follows stops serving and fetching at once (its waiting writers fail
        with NotLeaderOrFollowerError), and is returned for the caller to remove. None
        when this broker holds no copy: not opened, or opened with no role and empty."""
        partition = self._partitions.get(topic_partition)
        if partition is None:
            return None
        held = partition.role
        if held.role is Role.NONE:
            journal_end = partition.journal.journal_log(partition.name).log_end_offset
            empty = partition.log.log_end_offset == 0 and journal_end == 0
            return None if empty else partition  # a copy left by a run before a restart
        if leader_epoch > held.leader_epoch:
            # A follower of no one: answers of its old leader in flight are dropped.
            partition.take_role(
                PartitionRole(Role.FOLLOWER, NO_LEADER, leader_epoch), (), {}, now_ms()
            )
        return partition

    # --- the leader's side of replication -----------------------------------------------------

    def wait_for_records(
        self, positions: Sequence[tuple[TopicPartition, int]], max_wait_ms: int
    ) -> bool:
        """Wait until a consumer at one of these (partition, offset) positions has something
        to read, or to be told (True: records past it, an offset out of range, a partition
        gone or not served here; the caller's next read answers it), or ``max_wait_ms``
        passed (False). A front door's fetch of many partitions waits on all at once."""

        def ready() -> bool:
            for topic_partition, offset in positions:
                partition = self._partitions.get(topic_partition)
                if partition is None:
                    return True
                try:
                    partition.check_serves_clients()
                except TwinlogError:
                    return True
                end = partition.readable_end
                if partition.log.log_start_offset <= offset < end:
                    return True  # records to read
                if not end <= offset <= max(end, partition.log.log_end_offset):
                    return True  # out of range: to be told
            return False  # each at or past its readable end: nothing yet

        keys = [topic_partition for topic_partition, _ in positions]
        return self.replication.long_poll.poll(keys, ready, bool, max(0, max_wait_ms) / 1000)

    def replica_fetch(self, request: ReplicaFetch) -> list[FetchedPartition]:
        """A follower's fetch (the replication service's threads): every partition's
        answer, waiting up to ``max_wait_ms`` while none has anything new for it (a long
        poll, woken by appends and high-watermark moves)."""
        keys = [TopicPartition(*wanted.topic_partition) for wanted in request.partitions]
        leadership_key = new_leadership_key(request.replica_id)
        last: list[FetchedPartition] = []  # the answers of the latest read, in request order
        new_leadership = [False]  # this broker took a partition the follower replicates

        def read() -> list[FetchedPartition]:
            answers = self._replica_reads(request, keys, range(len(keys)))
            last[:] = [answers[index] for index in range(len(keys))]
            return list(last)

        def read_again(woken: set[Hashable]) -> list[FetchedPartition]:
            # Only the woken partitions' logs: the others' answers stand (their fetch
            # offsets were recorded by the first read; a move of their high watermark
            # would have woken them too).
            if leadership_key in woken:
                new_leadership[0] = True
            again = [index for index, key in enumerate(keys) if key in woken]
            for index, answer in self._replica_reads(request, keys, again).items():
                last[index] = answer
            return list(last)

        def enough(answers: list[FetchedPartition]) -> bool:
            # Followers learn a moved high watermark with their next batches, or when the
            # poll ends: only batches, errors, divergences and a leadership this broker
            # took of a partition the follower replicates (``new_leadership_key``) end it
            # early.
            return (
                self._is_closed()
                or new_leadership[0]
                or any(
                    answer.records or answer.error or answer.diverging is not None
                    for answer in answers
                )
            )

        # No safety-net re-reads: every change a follower must learn wakes a key of its
        # fetch (an append, a high watermark or role moved: the partition's; a partition
        # this broker took the leadership of: ``leadership_key``), and one read of every
        # partition costs the most here (it used to run ten times a second per follower:
        # at 1,000 partitions a third of an idle broker's CPU).
        return self.replication.long_poll.poll(
            [*keys, leadership_key],
            read,
            enough,
            max(0, request.max_wait_ms) / 1000,
            read_again=read_again,
            register_first=True,
        )

    def _replica_reads(
        self, request: ReplicaFetch, keys: list[TopicPartition], indices: Iterable[int]
    ) -> dict[int, FetchedPartition]:
        """The answers for ``request.partitions[i]``, i in ``indices``: each partition's
        logs read together (``replica_read_both``: a copy never reaches a follower
        before its marks)."""
        now = now_ms()
        by_partition: dict[TopicPartition, list[int]] = {}
        for index in indices:
            by_partition.setdefault(keys[index], []).append(index)
        answers: dict[int, FetchedPartition] = {}
        for topic_partition, group in by_partition.items():
            partition = self._partitions.get(topic_partition)
            if partition is None:
                # A partition moved away (its copy dropped) is led elsewhere: the follower
                # learns the new leader from ZooKeeper; only an unknown topic is unknown.
                known = topic_partition.topic in self._metadata.topics()
                error = NotLeaderOrFollowerError if known else UnknownTopicOrPartitionError
                for index in group:
                    answers[index] = FetchedPartition(
                        request.partitions[index].topic_partition,
                        error=error.__name__,
                        message=f"this broker holds no copy of {topic_partition}: not its leader",
                        log=request.partitions[index].log,
                    )
                continue
            wanted = [request.partitions[index] for index in group]
            read = partition.replica_read_both(
                request.replica_id,
                request.broker_epoch,
                wanted,
                [min(request.max_bytes, each.max_bytes or request.max_bytes) for each in wanted],
                now,
            )
            answers.update(zip(group, read, strict=True))
        return answers

    def isr_changes_due(
        self, registered_epochs: Mapping[int, int]
    ) -> list[tuple[TopicPartition, int, IsrChange]]:
        """The ISR changes this broker's led partitions should write now (KIP-497), each with
        the leader epoch it was decided at; each is marked proposed until
        ``isr_change_done``. The cluster member's thread."""
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

    # --- the follower's side of replication ------------------------------------------------

    def replica_fetch_request(
        self, leader_id: int, broker_epoch: int, max_wait_ms: int
    ) -> ReplicaFetch | None:
        """What this follower fetches from ``leader_id`` now (None: it follows it nowhere).
        The fetcher thread of that leader."""
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
            self.replication.broker_id, broker_epoch, tuple(positions), max_wait_ms=max_wait_ms
        )

    def apply_replica_fetch(self, leader_id: int, fetched: Iterable[FetchedPartition]) -> None:
        """The answers of ``leader_id`` to this follower's fetch (its fetcher thread). A
        partition that follows another leader by now drops its answer
        (``Partition.apply_fetched``); refused partitions are the fetcher's to report."""
        # Journal logs first (the leader's ``replica_read_both``): a copy is appended only
        # once its marks are, and not when its journal answer was dropped here.
        answers = sorted(fetched, key=lambda answer: answer.log is not LogKind.JOURNAL)
        journal_dropped: set[TopicPartition] = set()
        for answer in answers:
            topic_partition = TopicPartition(*answer.topic_partition)
            partition = self._partitions.get(topic_partition)
            if partition is None or answer.error:
                continue
            if answer.log is LogKind.JOURNAL:
                if not partition.apply_fetched(answer, leader_id):
                    journal_dropped.add(topic_partition)
            elif not (answer.records and topic_partition in journal_dropped):
                partition.apply_fetched(answer, leader_id)


__all__ = ["PartitionManager"]
