"""A cluster broker's group coordinators: partition P of ``__consumer_offsets`` is
replicated like any partition, and its leader coordinates the groups that hash to P
(Kafka's rule; CLUSTER.md §3.5).

Leading P at epoch e (``CoordinatorSlots`` with ``load_groups``): through the promotion
barrier, until the in-sync replicas hold all of P, then P's records are folded into
``GroupOffsets``, and the transactions whose offsets batches wait in P's journal (not yet
applied) mark their offsets pending, so a fetch answers PendingTransactionError, not a
stale offset, and KIP-447's fence sees them. Following P: its groups are dropped from
memory. Meanwhile its group calls get CoordinatorLoadInProgressError or
NotCoordinatorError, both retriable: the client finds the coordinator again.

A plain offset commit is appended at P's leader and answered once the in-sync replicas
hold it (acks=all), then folded into memory; a transactional one is journaled on P like
any transactional batch and folded when its APPLY_COMMIT copies it (the pending mark
then goes, on APPLY_ABORT too).

``load_lock``: a fold of P and an APPLY's fold of new records must not interleave (the
APPLY's would be lost under the load's replace); the broker takes it around both.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.group_offsets import GroupOffsets, pending_offsets
from twinlog.engine.broker.partition import Partition
from twinlog.engine.records.batch_reader import Record, iter_batches
from twinlog.journal import CopyState, JournalLogs

READ_BYTES_MAX = 1 << 20  # one read of the offsets log while folding it


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
