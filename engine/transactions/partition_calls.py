"""The seam between transaction coordinators and partition leaders: its calls and their epochs.

Two directions, one Protocol each (docs/seam.md; CLUSTER.md section 3.6):

    PartitionLeaders         coordinator -> partition leader
        count_entries        before PREPARE_COMMIT: freeze T on P, wait for T's appends
                             in progress, answer T's entry count (J3)
        apply_commit         copy T's first ``entry_count`` entries into the data log
        apply_abort          drop T's entries; later appends of T on P fail
    TransactionCoordinators  partition leader -> coordinator
        register_partition   on the first batch of T on P: the coordinator checks the
                             producer's generation and T's state, journals ADD_PARTITIONS
        settle_offsets_holder  a group coordinator, before T takes a group's offsets that
                             transaction H holds (pending): H's coordinator aborts H if it
                             is older and open, or refuses T (KIP-447, group_offset_fencing)

Every request carries ``CallEpochs``: the coordinator epoch (of the transaction
journal partition that owns T) and the partition leader epoch the caller
expects. A partition refuses a coordinator epoch lower than the highest it has
seen from that coordinator partition (TransactionCoordinatorFencedError), and an
expected leader epoch older than its own (FencedLeaderEpochError) or newer
(UnknownLeaderEpochError). Requests and answers are frozen dataclasses of plain
values, so a network transport can carry them as they are.

Ids carry their coordinator partition in their low bits, so any broker part can
find the coordinator of a transaction or producer id without a lookup table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from twinlog.engine.base.types import TopicPartition

PARTITION_BITS = 8
JOURNAL_PARTITIONS_MAX = 1 << PARTITION_BITS

PARTITION_GONE = -1  # count_entries' answer for a partition whose topic was deleted


def coordinator_partition_of(identifier: int) -> int:
    """Journal partition that owns a producer id or transaction id."""
    return identifier & (JOURNAL_PARTITIONS_MAX - 1)


@dataclass(frozen=True)
class CallEpochs:
    """Who sends a call and which leader it expects to reach."""

    coordinator_partition: int  # the transaction journal partition of the coordinator
    coordinator_epoch: int  # that partition's leader epoch, as the coordinator loaded it
    leader_epoch: int  # the data partition's leader epoch the caller expects


@dataclass(frozen=True)
class RegisterPartition:
    transaction_id: int
    topic_partition: TopicPartition
    producer_id: int
    producer_generation: int
    epochs: CallEpochs
    # An offsets partition's registration for a group's offsets (send_offsets): the
    # coordinator records the group with the transaction (ADD_OFFSETS), as Kafka's
    # AddOffsetsToTxn does; "" for a data batch.
    group_id: str = ""


@dataclass(frozen=True)
class CountEntries:
    transaction_id: int
    topic_partition: TopicPartition
    epochs: CallEpochs


@dataclass(frozen=True)
class EntryCount:
    entry_count: int  # T's journal entries on the partition; PARTITION_GONE if deleted


@dataclass(frozen=True)
class ApplyCommit:
    transaction_id: int
    topic_partition: TopicPartition
    attempts: tuple[str, ...] | None  # None: every attempt's batches
    entry_count: int  # what count_entries answered (0: not counted, e.g. old records)
    epochs: CallEpochs


@dataclass(frozen=True)
class ApplyAbort:
    transaction_id: int
    topic_partition: TopicPartition
    epochs: CallEpochs


@dataclass(frozen=True)
class SettleOffsetsHolder:
    """Transaction ``newcomer_id`` wants offsets of ``group_id`` for ``topic_partition``
    that transaction ``holder_id`` holds (pending): asked of ``holder_id``'s coordinator.
    ``newcomer_is_member``: the newcomer passed the group's generation check (it owns the
    partition now), so it wins over an open holder whatever their ages."""

    holder_id: int
    newcomer_id: int
    group_id: str
    topic_partition: TopicPartition
    newcomer_is_member: bool = False


@dataclass(frozen=True)
class LookupProducer:
    """Asked of ``producer_id``'s coordinator by any broker: a partition leader checking
    who may write with the id (ACLs), a Kafka listener learning the producer's open
    transaction."""

    producer_id: int
    producer_generation: int


@dataclass(frozen=True)
class IssuedProducer:
    """``transactional_id``: what the id was issued for (None: never issued there);
    ``ongoing_transaction_id``: the transaction that generation has ONGOING, if any."""

    transactional_id: str | None
    ongoing_transaction_id: int | None = None


class PartitionLeaders(Protocol):
    """The calls a coordinator makes on partition leaders. Each is idempotent."""

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        """The partition's leader epoch as the caller's metadata has it (0 if unknown)."""
        ...

    def count_entries(self, request: CountEntries) -> EntryCount:
        """Freeze T on P (later appends of T are refused, abortable), wait for T's appends
        in progress, and answer T's entry count: 0 if none, PARTITION_GONE if deleted."""
        ...

    def apply_commit(self, request: ApplyCommit) -> None:
        """Copy T's entries (only those of ``attempts`` and untagged, if given).

        ``entry_count`` fewer than the journal holds now means the journal lost some:
        the copy must refuse, not shrink.
        """
        ...

    def apply_abort(self, request: ApplyAbort) -> None:
        """Drop T's entries; every later append of T on P fails."""
        ...


class LocalLeaders(PartitionLeaders, Protocol):
    """Partition leaders that can tell which partitions this broker leads (by the metadata
    it holds, unrefreshed): a coordinator calls those in line, the others side by side.
    Only a hint: a call still goes wherever the partition's leader is."""

    def leads_here(self, topic_partition: TopicPartition) -> bool: ...


class CopyGroupLeaders(PartitionLeaders, Protocol):
    """Partition leaders that also take a copy group: several APPLY_COMMITs of one
    partition in one call (``apply_commits``)."""

    def apply_commits(self, requests: Sequence[ApplyCommit]) -> list[BaseException | None]:
        """``apply_commit`` of each request, all on one partition, copied in this order
        (consecutive ones may share the data log's fsync and the journal's); each one's
        error, None where it succeeded."""
        ...


def apply_commits(
    leaders: PartitionLeaders, requests: Sequence[ApplyCommit]
) -> list[BaseException | None]:
    """The requests (all on one partition) as a copy group where ``leaders`` take one
    (``CopyGroupLeaders``), else one ``apply_commit`` each, in order; each one's error,
    None where it succeeded."""
    group_call = getattr(leaders, "apply_commits", None)
    if group_call is not None:
        outcomes: list[BaseException | None] = group_call(requests)
        return outcomes
    return apply_each(leaders, requests)


def apply_each(
    leaders: PartitionLeaders, requests: Sequence[ApplyCommit]
) -> list[BaseException | None]:
    """One ``apply_commit`` per request, in order, each failure kept and the rest tried."""
    outcomes: list[BaseException | None] = []
    for request in requests:
        try:
            leaders.apply_commit(request)
        except Exception as error:
            outcomes.append(error)
        else:
            outcomes.append(None)
    return outcomes


class TransactionCoordinators(Protocol):
    """The calls a partition leader (a group coordinator, for the second) makes on the
    coordinator of a transaction."""

    def register_partition(self, request: RegisterPartition) -> None:
        """Add P to T (durably) before P journals T's first batch; raises as the
        coordinator refuses (fenced producer, T not open, a stale epoch)."""
        ...

    def settle_offsets_holder(self, request: SettleOffsetsHolder) -> None:
        """Returns once the newcomer may take the offsets: the holder is unknown or
        complete, or was open, older than the newcomer, and is now aborted. Raises
        ProducerFencedError when the holder began later and is open (the newcomer is the
        zombie), PendingTransactionError while the holder's commit is being decided or
        applied (retry shortly)."""
        ...

    def lookup_producer(self, request: LookupProducer) -> IssuedProducer:
        """What the producer id's coordinator knows of it (nothing changes)."""
        ...
