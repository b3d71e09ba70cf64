"""Partition reassignments as the broker answers them (Kafka's AlterPartitionReassignments
and ListPartitionReassignments).

On a cluster the controller moves the replicas (``engine/zookeeper/reassignment`` has the
rules, ``engine/zookeeper/reassignment_request`` the request); a single node has one
broker, so a partition can only be "moved" to where it is (``sole_move_results``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from twinlog.engine.base.errors import (
    InvalidConfigError,
    InvalidReplicaAssignmentError,
    NoReassignmentInProgressError,
    TwinlogError,
    UnknownTopicOrPartitionError,
)

# The request waits for the controller to take it at most this long (a server worker is
# held meanwhile); the copy itself runs on and is watched with ListPartitionReassignments.
REASSIGN_TIMEOUT_MS_MAX = 600_000
THROTTLE_BYTES_PER_S_MIN = 1024  # below this a new replica would never catch up


@dataclass(frozen=True)
class PartitionMove:
    """Move ``topic``-``partition`` to ``replicas`` (in order: the first is the preferred
    leader); ``replicas`` empty cancels the reassignment that runs."""

    topic: str
    partition: int
    replicas: tuple[int, ...]

    @property
    def cancel(self) -> bool:
        return not self.replicas


@dataclass(frozen=True)
class MoveResult:
    topic: str
    partition: int
    error: TwinlogError | None  # None: the controller took it


@dataclass(frozen=True)
class ReplicaProgress:
    """A replica being added, as its leader sees it: how far behind each log it is
    (-1: its leader has not heard from it yet)."""

    broker_id: int
    offsets_behind: int
    bytes_behind: int
    in_sync: bool


@dataclass(frozen=True)
class Reassignment:
    """A reassignment that runs: from ``original`` to ``target`` replicas."""

    topic: str
    partition: int
    replicas: tuple[int, ...]  # all of them while it runs: the target, then the leaving
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    original: tuple[int, ...]  # in their order: where a cancel goes back to
    leader: int
    throttle_bytes_per_s: int  # 0: none
    progress: tuple[ReplicaProgress, ...] = field(default=())  # empty: leader not asked

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)


def check_request(timeout_ms: int, throttle_bytes_per_s: int) -> None:
    """InvalidConfigError for a timeout or throttle out of range."""
    if not 0 < timeout_ms <= REASSIGN_TIMEOUT_MS_MAX:
        raise InvalidConfigError(
            f"a reassignment's timeout_ms is {timeout_ms}: give 1..{REASSIGN_TIMEOUT_MS_MAX}"
        )
    if throttle_bytes_per_s and throttle_bytes_per_s < THROTTLE_BYTES_PER_S_MIN:
        raise InvalidConfigError(
            f"throttle_bytes_per_s is {throttle_bytes_per_s}: give 0 (none) or at least "
            f"{THROTTLE_BYTES_PER_S_MIN}"
        )


def check_move(move: PartitionMove, live_broker_ids: Iterable[int]) -> None:
    """InvalidReplicaAssignmentError for target replicas that cannot be."""
    live = sorted(live_broker_ids)
    where = f"{move.topic}-{move.partition}"
    if len(set(move.replicas)) != len(move.replicas):
        raise InvalidReplicaAssignmentError(
            f"{where}: replicas {list(move.replicas)} name a broker twice"
        )
    unknown = [r for r in move.replicas if r not in live]
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"{where}: broker(s) {unknown} are not registered (the live brokers are {live}); "
            "start them first"
        )


def sole_move_results(
    moves: Sequence[PartitionMove], counts: Mapping[str, int], broker_id: int
) -> list[MoveResult]:
    """A single node's answer: its partitions live on it, broker ``broker_id``, and can
    only stay there."""
    results = []
    for move in moves:
        error: TwinlogError | None = None
        where = f"{move.topic}-{move.partition}"
        if not 0 <= move.partition < counts.get(move.topic, 0):
            error = UnknownTopicOrPartitionError(f"{where}: no such partition")
        elif move.cancel:
            error = NoReassignmentInProgressError(f"{where}: no reassignment runs")
        elif move.replicas != (broker_id,):
            error = InvalidReplicaAssignmentError(
                f"{where}: a single node has one broker, {broker_id}; its replicas can only "
                f"be [{broker_id}]. Run a cluster (docs/cluster.md) to move partitions"
            )
        results.append(MoveResult(move.topic, move.partition, error))
    return results
