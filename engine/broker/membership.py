"""Who decides a broker's roles: one interface, two members (Kafka has no single-node path).

A single node is a cluster of one. Its partitions, coordinators and group coordinators
take the same roles, through the same calls, as a cluster broker's; only what decides
the roles, and where coordinator <-> partition calls go, differs:

    SoleMember        (here) the single node: it leads every partition at the epoch the
                      partition last led, with the replica set and ISR {itself}; every
                      coordinator and group coordinator slot follows those leaderships;
                      the seam's calls stay in-process (``seam_adapters``)
    ClusterMember     (``rpc.cluster.cluster_member``) a ZooKeeper member: the controller
                      decides, ZooKeeper's watches hand each role over, and the seam's
                      calls reach other brokers over gRPC

``Membership`` is what the broker asks of either; the member hands roles to the broker
through ``RoleTaker`` (``Broker.take_partition_role``).

Epochs on one node: a partition's leader epoch is the one its log last recorded (0 for a
new partition), kept across restarts. Nothing can be fenced on one node (no other broker
ever led it, and a restart ends every writer of the last run), and keeping the epoch
spares a checkpoint write per partition per start.

Thread rule: ``start`` from the broker's start-up; ``topic_created`` from the thread that
created the topic, under the broker's admin lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from twinlog.engine.base.errors import (
    BrokerUnavailableError,
    CoordinatorLoadInProgressError,
    InvalidConfigError,
    TwinlogError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC, is_internal
from twinlog.engine.broker.leader_elections import ElectionResult, sole_results
from twinlog.engine.broker.partition import Partition
from twinlog.engine.broker.reassignments import (
    MoveResult,
    PartitionMove,
    Reassignment,
    sole_move_results,
)
from twinlog.engine.transactions.coordinator_slots import CoordinatorSlots

log = logging.getLogger(__name__)

SOLE_BROKER_ID = 0  # the single node's broker id (what Kafka clients see in its metadata)
SOLE_BROKER_EPOCH = 0
# A single node waits this long at most, at open, for its coordinators to load (replay
# from the checkpoint, redo the prepared decisions); a damaged journal fails at once.
SOLE_LOAD_WAIT_S = 300.0
LOAD_POLL_S = 0.05


class Membership(Protocol):
    """What the broker asks of whatever decides its roles."""

    def check_replication_factor(self, topic: str, replication_factor: int) -> None:
        """Refuse (InvalidConfigError) a new topic's replication factor this membership can
        never hold; ZooKeeper's store refuses one above the brokers live at the time."""
        ...

    def topic_created(self, topic: str, partitions: int, first: int = 0) -> None:
        """A topic's partitions ``first`` to ``partitions`` - 1 were just opened here (all of
        a new topic's, the added ones of a grown topic): give them their roles (the sole
        member) or let the cluster do it (a ZooKeeper member: the controller's watch)."""
        ...

    def elect_preferred_leaders(
        self, partitions: Sequence[TopicPartition] | None, timeout_ms: int
    ) -> list[ElectionResult]:
        """Lead ``partitions`` (None: all) by their preferred leaders where they may lead
        (``leader_elections``); one result per partition."""
        ...

    def reassign_partitions(
        self, moves: Sequence[PartitionMove], throttle_bytes_per_s: int, timeout_ms: int
    ) -> list[MoveResult]:
        """Start (or cancel) moving partitions to other replicas (``reassignments``); one
        result per move, once the cluster took it or refused it."""
        ...

    def running_reassignments(self) -> list[Reassignment]:
        """The reassignments that run, without progress (the leaders add it)."""
        ...


class AwaitingCluster:
    """A cluster broker's membership until its ZooKeeper member joins: the controller
    gives a new topic's partitions their roles, through ZooKeeper's watches."""

    def check_replication_factor(self, topic: str, replication_factor: int) -> None:
        return None

    def topic_created(self, topic: str, partitions: int, first: int = 0) -> None:
        return None

    def elect_preferred_leaders(
        self, partitions: Sequence[TopicPartition] | None, timeout_ms: int
    ) -> list[ElectionResult]:
        raise _not_joined("no election")

    def reassign_partitions(
        self, moves: Sequence[PartitionMove], throttle_bytes_per_s: int, timeout_ms: int
    ) -> list[MoveResult]:
        raise _not_joined("no reassignment")

    def running_reassignments(self) -> list[Reassignment]:
        raise _not_joined("no reassignment")


def _not_joined(what: str) -> BrokerUnavailableError:
    return BrokerUnavailableError(
        f"this broker has not joined its cluster yet: {what} can be asked of it; retry in a moment"
    )


class RoleTaker(Protocol):
    """What a member needs of the broker."""

    def take_partition_role(
        self,
        topic_partition: TopicPartition,
        leader_id: int,
        leader_epoch: int,
        replicas: Iterable[int],
        isr: Mapping[int, int],
    ) -> None: ...

    def partition(self, topic_partition: TopicPartition) -> Partition: ...

    def topic_partition_counts(self) -> Mapping[str, int]: ...

    def internal_slots(self) -> list[CoordinatorSlots[Any]]: ...


def lead_alone(
    partition: Partition,
    take_role: Callable[[TopicPartition, int, int, Iterable[int], Mapping[int, int]], None],
) -> None:
    """Give ``partition`` the sole member's role: leader at the epoch its log last
    recorded (0 for a new one), replicas and ISR {the sole broker}."""
    take_role(
        partition.topic_partition,
        SOLE_BROKER_ID,
        max(partition.epochs.leader_epoch, 0),
        (SOLE_BROKER_ID,),
        {SOLE_BROKER_ID: SOLE_BROKER_EPOCH},
    )


class SoleMember:
    """The single node's cluster of one (see the module)."""

    def __init__(self, broker: RoleTaker) -> None:
        self._broker = broker

    def start(self) -> None:
        """Lead every partition of every topic, then wait until every coordinator and group
        coordinator slot has loaded; raise the first load error that retrying will not
        cure (a damaged journal), as the open's error."""
        # The data partitions first, the journal's last: a coordinator that loads redoes
        # its prepared transactions at once, on partitions that must lead by then.
        counts = self._broker.topic_partition_counts()
        for topic in sorted(
            counts, key=lambda name: (is_internal(name), name == TXN_JOURNAL_TOPIC)
        ):
            self.topic_created(topic, counts[topic])
        self._wait_loaded()

    def check_replication_factor(self, topic: str, replication_factor: int) -> None:
        if replication_factor != 1:
            raise InvalidConfigError(
                f"topic {topic!r}: replication factor {replication_factor}, but a single "
                "node keeps one copy of each partition (a cluster of one broker); use 1, or "
                "start a cluster (twinlog serve --zookeeper) to replicate"
            )

    def topic_created(self, topic: str, partitions: int, first: int = 0) -> None:
        for index in range(first, partitions):
            self._lead(self._broker.partition(TopicPartition(topic, index)))

    def elect_preferred_leaders(
        self, partitions: Sequence[TopicPartition] | None, timeout_ms: int
    ) -> list[ElectionResult]:
        """Every partition is led by its one replica, this broker, already."""
        known = [
            TopicPartition(topic, index)
            for topic, count in sorted(self._broker.topic_partition_counts().items())
            for index in range(count)
        ]
        return sole_results(known if partitions is None else partitions, known)

    def reassign_partitions(
        self, moves: Sequence[PartitionMove], throttle_bytes_per_s: int, timeout_ms: int
    ) -> list[MoveResult]:
        """Every partition lives on this broker and can only stay there."""
        counts = self._broker.topic_partition_counts()
        return sole_move_results(moves, counts, SOLE_BROKER_ID)

    def running_reassignments(self) -> list[Reassignment]:
        return []

    def _lead(self, partition: Partition) -> None:
        """Lead ``partition`` (its ISR, itself, holds all it has: through the promotion
        barrier at once), and finish the copies a crash left half-done now, as the single
        node always has at open, so reads see them without waiting for a write."""
        lead_alone(partition, self._broker.take_partition_role)
        partition.finish_copies()

    def _wait_loaded(self) -> None:
        deadline = time.monotonic() + SOLE_LOAD_WAIT_S
        for slots in self._broker.internal_slots():
            for index in range(slots.count):
                while not slots.wait_active(index, LOAD_POLL_S):
                    error = slots.load_error(index)
                    if isinstance(error, TwinlogError) and not error.retriable:
                        raise error
                    if error is not None and not isinstance(error, TwinlogError):
                        raise error
                    if time.monotonic() > deadline:
                        raise CoordinatorLoadInProgressError(
                            f"{slots.kind} {index} did not load within {SOLE_LOAD_WAIT_S:.0f} s "
                            f"(last error: {error}); see the log above, and open again"
                        )


__all__ = [
    "SOLE_BROKER_EPOCH",
    "SOLE_BROKER_ID",
    "AwaitingCluster",
    "Membership",
    "RoleTaker",
    "SoleMember",
    "lead_alone",
]
