"""The coordinator <-> partition seam on this broker: the in-process ends of its calls.

The calls and their Protocols are ``twinlog.engine.transactions.partition_calls``
(docs/seam.md). Three adapters plug them in:

    LocalPartitionLeaders    coordinator -> this broker's own partitions (what a
                             transport's server side calls, and every call embedded)
    LocalCoordinators        partition -> the transaction's coordinator: the broker's
                             ``transaction_coordinators`` as it is at each call
    HereCoordinators         this broker's own coordinators: the broker's
                             ``transaction_coordinators`` until a cluster transport
                             replaces it (the sole member never does), and the local
                             side of that transport
    CurrentPartitionLeaders  what coordinators call: the broker's ``partition_leaders``
                             as it is at each call (in-process until a transport replaces it)

Each call passes the partition's epoch check first (``partition_epochs``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from twinlog.engine.base.errors import UnknownTopicOrPartitionError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC
from twinlog.engine.broker.partition import Partition
from twinlog.engine.broker.partition_manager import PartitionManager
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
    apply_commits,
)

log = logging.getLogger(__name__)


class OwnCoordinators(Protocol):
    """This broker's own coordinators' answers (the broker's ``*_here`` calls)."""

    def register_partition_here(self, request: RegisterPartition) -> None: ...

    def settle_offsets_holder_here(self, request: SettleOffsetsHolder) -> None: ...

    def lookup_producer_here(self, request: LookupProducer) -> IssuedProducer: ...


class SeamHost(Protocol):
    """What the adapters need of the broker: its current transports and its own
    coordinators' answers."""

    partition_leaders: PartitionLeaders
    transaction_coordinators: TransactionCoordinators

    def register_partition_here(self, request: RegisterPartition) -> None: ...

    def settle_offsets_holder_here(self, request: SettleOffsetsHolder) -> None: ...

    def lookup_producer_here(self, request: LookupProducer) -> IssuedProducer: ...


class LocalPartitionLeaders:
    """Coordinator -> partition leader calls on this broker's partitions
    (``PartitionLeaders``). Called by completion workers, and by the coordination
    service's threads for other brokers' coordinators."""

    def __init__(
        self,
        partitions: PartitionManager,
        accept_journal_loss: bool,
        offsets_applied: Callable[[Partition, int, int], None],
        offsets_settled: Callable[[int, int], None],
    ) -> None:
        self._partitions = partitions
        self._accept_journal_loss = accept_journal_loss
        # __consumer_offsets records just copied into the log (partition, first, next
        # offset): the group offsets fold them; and a transaction's pending offsets on an
        # offsets partition (transaction id, partition index) are settled either way
        self._offsets_applied = offsets_applied
        self._offsets_settled = offsets_settled

    def _partition(self, topic_partition: TopicPartition) -> Partition | None:
        """The partition, None once its topic is deleted. A broker opens a partition of a
        topic created since it started (its answer then says it does not lead it), never
        taking a live topic for a deleted one."""
        partition = self._partitions.get(topic_partition)
        if partition is None:
            try:  # one read of that topic's metadata, refused if it is gone
                return self._partitions.get_or_open(topic_partition)
            except UnknownTopicOrPartitionError:
                return None
        return partition

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        partition = self._partition(topic_partition)
        return 0 if partition is None else partition.epochs.leader_epoch

    def leads_here(self, topic_partition: TopicPartition) -> bool:
        """Every call is in this process (``LocalLeaders``): one with no leader here is
        refused here too, as fast."""
        return True

    def count_entries(self, request: CountEntries) -> EntryCount:
        partition = self._partition(request.topic_partition)
        if partition is None:
            return EntryCount(PARTITION_GONE)
        partition.epochs.check(request.epochs)
        return EntryCount(partition.count_entries(request.transaction_id))

    def apply_commit(self, request: ApplyCommit) -> None:
        error = self.apply_commits([request])[0]
        if error is not None:
            raise error

    def apply_commits(self, requests: Sequence[ApplyCommit]) -> list[BaseException | None]:
        """A copy group on one partition (``CopyGroupLeaders``): each request's error, or
        None."""
        topic_partition = requests[0].topic_partition
        assert all(r.topic_partition == topic_partition for r in requests), requests
        partition = self._partition(topic_partition)
        if partition is None:
            log.warning(
                "APPLY_COMMIT %s: partition %s no longer exists; skipped",
                [r.transaction_id for r in requests],
                topic_partition,
            )
            return [None] * len(requests)
        try:
            for request in requests:
                partition.epochs.check(request.epochs)
        except Exception as error:
            return [error] * len(requests)
        outcomes = partition.apply_commits(
            [
                (request.transaction_id, request.attempts, self._entries_to_check(request))
                for request in requests
            ]
        )
        errors: list[BaseException | None] = []
        for request, outcome in zip(requests, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                errors.append(outcome)
                continue
            errors.append(None)
            if topic_partition.topic == OFFSETS_TOPIC:
                first_offset, next_offset = outcome
                if next_offset > first_offset:
                    self._offsets_applied(partition, first_offset, next_offset)
                self._offsets_settled(request.transaction_id, topic_partition.partition)
        return errors

    def _entries_to_check(self, request: ApplyCommit) -> int:
        """The entry count the copy checks the journal against (0: none)."""
        journaled_entries = request.entry_count
        if journaled_entries and self._accept_journal_loss:
            log.error(
                "APPLY_COMMIT %d on %s: not checking the %d journal entries its commit counted "
                "(accept_journal_loss): whatever the journal lost of it stays lost",
                request.transaction_id,
                request.topic_partition,
                journaled_entries,
            )
            journaled_entries = 0
        return journaled_entries

    def apply_abort(self, request: ApplyAbort) -> None:
        partition = self._partition(request.topic_partition)
        if partition is not None:
            partition.epochs.check(request.epochs)
            partition.apply_abort(request.transaction_id)
            if request.topic_partition.topic == OFFSETS_TOPIC:
                self._offsets_settled(request.transaction_id, request.topic_partition.partition)


class LocalCoordinators:
    """Partition -> coordinator calls (``TransactionCoordinators``): to the host's
    ``transaction_coordinators`` as it is at each call (this broker's own coordinators,
    or a cluster transport that reaches the others). Called by partitions' produce
    paths and by the offsets fence."""

    def __init__(self, host: SeamHost) -> None:
        self._host = host

    def register_partition(self, request: RegisterPartition) -> None:
        self._host.transaction_coordinators.register_partition(request)

    def settle_offsets_holder(self, request: SettleOffsetsHolder) -> None:
        self._host.transaction_coordinators.settle_offsets_holder(request)

    def lookup_producer(self, request: LookupProducer) -> IssuedProducer:
        return self._host.transaction_coordinators.lookup_producer(request)


class HereCoordinators:
    """This broker's own coordinators (``Broker.register_partition_here``, ...): what the
    broker's ``transaction_coordinators`` is until a cluster transport replaces it, and
    that transport's local side. Never ``LocalCoordinators``, which forwards to
    ``transaction_coordinators`` and would loop."""

    def __init__(self, host: OwnCoordinators) -> None:
        self._host = host

    def register_partition(self, request: RegisterPartition) -> None:
        self._host.register_partition_here(request)

    def settle_offsets_holder(self, request: SettleOffsetsHolder) -> None:
        self._host.settle_offsets_holder_here(request)

    def lookup_producer(self, request: LookupProducer) -> IssuedProducer:
        return self._host.lookup_producer_here(request)


class CurrentPartitionLeaders:
    """The coordinators' ``PartitionLeaders``: the host's ``partition_leaders`` as it is at
    each call (in-process by default; a cluster transport replaces it after open)."""

    def __init__(self, host: SeamHost) -> None:
        self._host = host

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        return self._host.partition_leaders.leader_epoch(topic_partition)

    def leads_here(self, topic_partition: TopicPartition) -> bool:
        leads_here = getattr(self._host.partition_leaders, "leads_here", None)
        return leads_here is not None and bool(leads_here(topic_partition))

    def count_entries(self, request: CountEntries) -> EntryCount:
        return self._host.partition_leaders.count_entries(request)

    def apply_commit(self, request: ApplyCommit) -> None:
        self._host.partition_leaders.apply_commit(request)

    def apply_commits(self, requests: Sequence[ApplyCommit]) -> list[BaseException | None]:
        return apply_commits(self._host.partition_leaders, requests)

    def apply_abort(self, request: ApplyAbort) -> None:
        self._host.partition_leaders.apply_abort(request)


__all__ = [
    "CurrentPartitionLeaders",
    "HereCoordinators",
    "LocalCoordinators",
    "LocalPartitionLeaders",
    "OwnCoordinators",
    "SeamHost",
]
