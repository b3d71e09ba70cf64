"""The group coordinators this broker runs: partition P of ``__consumer_offsets`` is
replicated like any partition, and its leader coordinates the groups that hash to P
(Kafka's rule; CLUSTER.md §3.5).

Leading P at epoch e (``CoordinatorSlots`` with ``load_groups``): through the promotion
barrier, until the in-sync replicas hold all of P, then P's records are folded into
``GroupOffsets``, and the transactions whose offsets batches wait in P's journal (not yet
applied) mark their offsets pending, so a fetch answers PendingTransactionError, not a
stale offset, and KIP-447's fence sees them. The groups' member records go to the
membership (``GroupOffsets.restore_with``), which takes the members back, each with a full
session from the load: they go on here with their epochs and partitions. Following P:
its groups are dropped from memory (their members go on at P's next leader). Meanwhile its group calls get CoordinatorLoadInProgressError or
NotCoordinatorError, both retriable: the client finds the coordinator again.

A plain offset commit is appended at P's leader and answered once the in-sync replicas
hold it (acks=all), then folded into memory; a transactional one is journaled on P like
any transactional batch and folded when its APPLY_COMMIT copies it (the pending mark
then goes, on APPLY_ABORT too).

``load_lock``: a fold of P and an APPLY's fold of new records must not interleave (the
APPLY's would be lost under the load's replace); ``GroupCoordinators`` takes it around both.

A single node leads every partition of ``__consumer_offsets`` (its sole member), so it
coordinates every group, loaded the same way.

State, and who changes it (``GroupCoordinators``):
    slots       one per offsets partition; ``lead``/``follow`` from the member's thread,
                loads on the slots' loader threads
    _load_lock  held by a load's fold and by every fold of new records (``observe``)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.base.units import MEBIBYTE
from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC, GroupOffsets, pending_offsets
from twinlog.engine.broker.partition import Partition
from twinlog.engine.broker.partition_manager import PartitionManager
from twinlog.engine.records.batch_reader import Record, iter_batches
from twinlog.engine.transactions.coordinator_slots import CoordinatorSlots
from twinlog.journal import CopyState, JournalLogs

log = logging.getLogger(__name__)

READ_BYTES_MAX = MEBIBYTE  # one read of the offsets log while folding it


@dataclass(frozen=True)
class LoadedGroups:
    """What a slot of ``CoordinatorSlots`` holds for a group coordinator: partition P led
    at ``leader_epoch``, with ``keys`` committed offsets folded in at load."""

    partition_index: int
    leader_epoch: int
    keys: int


def records_between(partition: Partition, first_offset: int, next_offset: int) -> Iterator[Record]:
    """The records of the partition's data log at offsets [first_offset, next_offset)."""
    offset = first_offset
    while offset < next_offset:
        chunk = partition.log.read(offset, READ_BYTES_MAX)
        if not chunk:
            return
        for batch in iter_batches(chunk):
            if batch.header.base_offset >= next_offset:
                return
            yield from (r for r in batch.records() if offset <= r.offset < next_offset)
            offset = batch.header.next_offset


def load_groups(
    partition: Partition,
    journal: JournalLogs,
    group_offsets: GroupOffsets,
    leader_epoch: int,
    load_lock: threading.RLock,
) -> LoadedGroups:
    """Fold partition P of ``__consumer_offsets`` in, as its leader at ``leader_epoch``
    (raises, retriable, while the replicas cannot be waited for or leadership moved)."""
    committed_end = partition.wait_committed_to_end(leader_epoch)
    journal.wait_applied()  # the journal's committed entries are in LMDB before we read them
    name = partition.name
    with load_lock:
        pending: set[tuple[str, TopicPartition, int]] = set()
        for copy in journal.transactions(name, (CopyState.OPEN, CopyState.APPLYING)):
            sequences = journal.sequences(name, copy.transaction_id)
            batches = (bytes(b) for b in journal.iter_batches(name, sequences))
            pending |= pending_offsets(batches, copy.transaction_id)
        keys = group_offsets.replace_partition(
            partition.topic_partition.partition,
            records_between(partition, partition.log.log_start_offset, committed_end),
            sorted(pending),
        )
    return LoadedGroups(partition.topic_partition.partition, leader_epoch, keys)


class GroupCoordinators:
    """Which offsets partitions this broker coordinates groups for, and the fold of their
    records into ``GroupOffsets``."""

    def __init__(
        self,
        group_offsets: GroupOffsets,
        partitions: PartitionManager,
        journal: JournalLogs,
        drop_members: Callable[[int], None],
        is_stopping: Callable[[], bool],
        roles_known: Callable[[], bool] = lambda: True,
    ) -> None:
        """Called once by the broker's start-up (step 4). ``drop_members(P)``: forget the
        members of P's groups held in memory (the next coordinator restores them from P).
        ``roles_known()``: as ``CoordinatorManager``'s."""
        self._offsets = group_offsets
        self._partitions = partitions
        self._journal = journal
        self._drop_members = drop_members
        self._load_lock = threading.RLock()
        self.slots: CoordinatorSlots[LoadedGroups] = CoordinatorSlots(
            group_offsets.partition_count,
            self._load,
            self._unload,
            is_stopping,
            kind="group coordinator",
            topic=OFFSETS_TOPIC,
            roles_known=roles_known,
        )

    def _load(self, partition_index: int, leader_epoch: int) -> LoadedGroups:
        """Group coordinator ``partition_index``: fold ``__consumer_offsets-P`` in, as its
        leader at ``leader_epoch`` (a slot's loader thread)."""
        started = time.monotonic()
        partition = self._partitions.get_or_open(TopicPartition(OFFSETS_TOPIC, partition_index))
        self._drop_members(partition_index)  # members of an earlier term
        loaded = load_groups(partition, self._journal, self._offsets, leader_epoch, self._load_lock)
        log.info(
            "group coordinator %d loaded at epoch %d: %d committed offsets, %.0f ms",
            partition_index,
            leader_epoch,
            loaded.keys,
            (time.monotonic() - started) * 1000,
        )
        return loaded

    def _unload(self, loaded: LoadedGroups) -> None:
        with self._load_lock:
            self._offsets.drop_partition(loaded.partition_index)
        self._drop_members(loaded.partition_index)  # the new one restores them from P
        log.info("group coordinator %d unloaded", loaded.partition_index)

    def coordinator_of(self, group_id: str) -> Partition:
        """The offsets partition of ``group_id``, once this broker is its group coordinator:
        NotCoordinatorError or CoordinatorLoadInProgressError (retriable) otherwise."""
        topic_partition = self._offsets.partition_for(group_id)
        self.slots.get(topic_partition.partition)
        return self._partitions.get_or_open(topic_partition)

    def observe(self, partition: Partition, first_offset: int, next_offset: int) -> None:
        """Fold offsets records just written into the view, only while this broker
        coordinates the partition's groups (a load folds them otherwise)."""
        with self._load_lock:
            if not self.slots.is_active(partition.topic_partition.partition):
                return
            self._offsets.observe(records_between(partition, first_offset, next_offset))

    def settled(self, transaction_id: int, offsets_partition_index: int) -> None:
        """A transaction's offsets on that offsets partition are applied or aborted."""
        self._offsets.clear_pending_of(transaction_id, offsets_partition_index)

    def close(self) -> None:
        self.slots.close()
