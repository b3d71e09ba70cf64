"""Who may put a consumer group's offsets into a transaction: KIP-447's fencing, as one policy.

``GroupOffsets`` (``group_offsets``) records which transaction holds a pending
offset commit per (group, topic-partition); this module decides what a newcomer
may do about it:

    a transactional offset commit for (group, topic-partition) is first checked against
    the group's generation at its coordinator (``engine/groups``: the committing member
    must own the partition, from an epoch no older than the one it was given it in; a
    zombie is refused there with StaleMemberEpochError or UnknownMemberIdError). If
    another transaction T_old that is still ONGOING holds the offsets, T_old belonged to
    the partition's previous owner and is aborted, whatever its age (KIP-447: fenced by
    generation, not by transaction age).

    A commit from outside any membership (a group without members: ``assign()`` and
    manual offsets) has no generation; for it, transaction age decides: T_old is aborted
    if it began earlier (transaction ids increase with time), and the newcomer is refused
    with ProducerFencedError if T_old began later (the newcomer is the zombie).
    If T_old is already PREPARE_COMMIT it cannot be aborted: the newcomer waits for its
    completion (at most HOLDER_COMPLETION_WAIT_S, then PendingTransactionError: retry).
    A producer's previous transaction is often still completing when its next one sends
    offsets (a producer begins once the previous one is prepared).

    a plain (non-transactional) commit of offsets a transaction holds is refused
    with PendingTransactionError.

Pending marks are set when a transaction takes the offsets, set again at start-up
for every transaction still in flight (in a cluster: when a broker loads the offsets
partition, from its journal), and cleared when it completes either way (in a cluster:
when its APPLY reaches the offsets partition).

The rule runs where the holder's state is, at its coordinator (``settle_holder``); the
fence asks it through ``TransactionCoordinators.settle_offsets_holder``, in-process on a
single node, across the network in a cluster where the group's coordinator (the leader
of its offsets partition) and the holder's may be different brokers.

Thread rule: any thread may call. Fencing and taking a group's offsets run under
one lock per group (groups share ``GROUP_LOCKS`` locks by hash).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection

from twinlog.engine.base.crc32c import crc32c
from twinlog.engine.base.errors import PendingTransactionError, ProducerFencedError
from twinlog.engine.base.types import TopicPartition, TransactionState
from twinlog.engine.broker.group_offsets import GroupOffsets
from twinlog.engine.transactions.coordinator import Coordinator
from twinlog.engine.transactions.partition_calls import SettleOffsetsHolder
from twinlog.engine.transactions.transaction_metadata import TransactionMetadata

log = logging.getLogger(__name__)

GROUP_LOCKS = 64  # groups share these by hash: enough that unrelated groups rarely wait
# A prepared holder is waited for this long before the newcomer is told to retry: within
# a coordination call's deadline, and a group's lock is held meanwhile.
HOLDER_COMPLETION_WAIT_S = 5.0


def settle_holder(coordinator: Coordinator, request: SettleOffsetsHolder) -> None:
    """The rule above, at the holder's coordinator: return once the newcomer may take the
    offsets (aborting an older open holder), or raise."""
    holder_id, group_id = request.holder_id, request.group_id
    holder = coordinator.transaction(holder_id)
    if holder is None:
        return
    if (
        not request.newcomer_is_member
        and holder_id > request.newcomer_id
        and holder.state is TransactionState.ONGOING
    ):
        raise ProducerFencedError(
            f"group {group_id!r} offsets for {request.topic_partition} are held by "
            f"transaction {holder_id}, which began after this transaction "
            f"{request.newcomer_id}: this producer is a zombie; close it"
        )
    if holder.state is TransactionState.ONGOING:
        log.info(
            "transaction %d commits offsets of group %r held by %s transaction %d: "
            "aborting it (KIP-447)",
            request.newcomer_id,
            group_id,
            "the previous owner's" if request.newcomer_is_member else "older",
            holder_id,
        )
        coordinator.admin_abort(holder_id)
    elif not coordinator.wait_complete(holder, HOLDER_COMPLETION_WAIT_S):
        # Prepared: it completes soon. Most often the holder is the newcomer's own
        # producer's previous transaction, still being applied (pipelining).
        raise PendingTransactionError(
            f"group {group_id!r} offsets for {request.topic_partition} are being committed "
            f"by transaction {holder_id}; retry shortly"
        )


class GroupOffsetFence:
    def __init__(
        self, group_offsets: GroupOffsets, settle: Callable[[SettleOffsetsHolder], None]
    ) -> None:
        """``settle``: ``settle_holder`` at the holder's coordinator, wherever it runs (this
        broker, or another one in a cluster: ``TransactionCoordinators``)."""
        self._group_offsets = group_offsets
        self._settle = settle
        self._locks = [threading.Lock() for _ in range(GROUP_LOCKS)]

    def take(
        self,
        transaction_id: int,
        group_id: str,
        offsets: Collection[TopicPartition],
        journal_offsets: Callable[[], object],
        newcomer_is_member: bool = False,
    ) -> None:
        """Fence the offsets' holders, journal the offsets in the transaction
        (``journal_offsets``) and mark them pending, as one step per group: two newcomers
        racing past the fence at once would both hold the same offsets, and the zombie's
        could win."""
        with self._locks[crc32c(group_id.encode("utf-8")) % GROUP_LOCKS]:
            self.fence_holders(transaction_id, group_id, offsets, newcomer_is_member)
            journal_offsets()
            self._group_offsets.mark_pending(group_id, offsets, transaction_id)

    def fence_holders(
        self,
        transaction_id: int,
        group_id: str,
        offsets: Collection[TopicPartition],
        newcomer_is_member: bool = False,
    ) -> None:
        """Another transaction holding these offsets is aborted, or we are refused (KIP-447)."""
        holders = self._group_offsets.holders(group_id, offsets)
        for topic_partition, holder_id in holders.items():
            if holder_id != transaction_id:
                self._settle(
                    SettleOffsetsHolder(
                        holder_id, transaction_id, group_id, topic_partition, newcomer_is_member
                    )
                )

    def check_plain_commit(self, group_id: str, offsets: Collection[TopicPartition]) -> None:
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
