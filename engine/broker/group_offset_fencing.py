"""Who may put a consumer group's offsets into a transaction: KIP-447's fencing, as one policy.

``GroupOffsets`` (``group_offsets``) records which transaction holds a pending
offset commit per (group, topic-partition); this module decides what a newcomer
may do about it:

    a transactional offset commit for (group, topic-partition) held by another
    transaction T_old that is still ONGOING aborts T_old if T_old began earlier
    (transaction ids increase with time), and is refused with
    ProducerFencedError if T_old began later (the newcomer is the zombie).
    If T_old is already PREPARE_COMMIT it cannot be aborted: the newcomer gets
    PendingTransactionError and retries once T_old is applied.

    a plain (non-transactional) commit of offsets a transaction holds is refused
    with PendingTransactionError.

Pending marks are set when a transaction takes the offsets, set again at start-up
for every transaction still in flight, and cleared when it completes either way.

Thread rule: any thread may call. Fencing and taking a group's offsets run under
one lock per group (groups share ``GROUP_LOCKS`` locks by hash).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from twinlog.engine.base.crc32c import crc32c
from twinlog.engine.base.errors import PendingTransactionError, ProducerFencedError
from twinlog.engine.base.types import TopicPartition, TransactionState
from twinlog.engine.broker.coordinator import Coordinator
from twinlog.engine.broker.group_offsets import GroupOffsets
from twinlog.engine.broker.transaction_metadata import TransactionMetadata

log = logging.getLogger(__name__)

GROUP_LOCKS = 64  # groups share these by hash: enough that unrelated groups rarely wait


class GroupOffsetFence:
    def __init__(
        self, group_offsets: GroupOffsets, coordinator_for_id: Callable[[int], Coordinator]
    ) -> None:
        self._group_offsets = group_offsets
        self._coordinator_for_id = coordinator_for_id
        self._locks = [threading.Lock() for _ in range(GROUP_LOCKS)]

    def take(
        self,
        transaction_id: int,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        journal_offsets: Callable[[], None],
    ) -> None:
        """Fence the offsets' holders, journal the offsets in the transaction
        (``journal_offsets``) and mark them pending, as one step per group: two newcomers
        racing past the fence at once would both hold the same offsets, and the zombie's
        could win."""
        with self._locks[crc32c(group_id.encode("utf-8")) % GROUP_LOCKS]:
            self.fence_holders(transaction_id, group_id, offsets)
            journal_offsets()
            self._group_offsets.mark_pending(group_id, offsets, transaction_id)

    def fence_holders(
        self, transaction_id: int, group_id: str, offsets: Mapping[TopicPartition, int]
    ) -> None:
        """Another transaction holding these offsets is aborted, or we are refused (KIP-447)."""
        holders = self._group_offsets.holders(group_id, offsets)
        for topic_partition, holder_id in holders.items():
            if holder_id == transaction_id:
                continue
            holder_coordinator = self._coordinator_for_id(holder_id)
            holder = holder_coordinator.transaction(holder_id)
            if holder is None:
                continue
            if holder_id > transaction_id and holder.state is TransactionState.ONGOING:
                raise ProducerFencedError(
                    f"group {group_id!r} offsets for {topic_partition} are held by transaction "
                    f"{holder_id}, which began after this transaction {transaction_id}: this "
                    "producer is a zombie; close it"
                )
            if holder.state is TransactionState.ONGOING:
                log.info(
                    "transaction %d commits offsets of group %r held by older transaction %d: "
                    "aborting it (KIP-447)",
                    transaction_id,
                    group_id,
                    holder_id,
                )
                holder_coordinator.admin_abort(holder_id)
            elif not holder.state.is_complete:
                raise PendingTransactionError(
                    f"group {group_id!r} offsets for {topic_partition} are being committed by "
                    f"transaction {holder_id}; retry shortly"
                )

    def check_plain_commit(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Refuse a plain commit of offsets that a transaction holds."""
        holders = self._group_offsets.holders(group_id, offsets)
        if holders:
            raise PendingTransactionError(
                f"group {group_id!r} has offsets pending in transaction(s) "
                f"{sorted(set(holders.values()))}; retry shortly"
            )

    def restore(self, txn: TransactionMetadata) -> None:
        """At start-up: an in-flight transaction holds the offsets it took before the restart."""
        for group_id, topic_partitions in txn.groups.items():
            self._group_offsets.mark_pending(group_id, topic_partitions, txn.transaction_id)

    def release(self, txn: TransactionMetadata) -> None:
        """A completed (committed or aborted) transaction holds no offsets any more."""
        if txn.groups:
            self._group_offsets.clear_pending(txn.transaction_id, txn.groups)
