"""What one member of a consumer group owns, and how it moves toward its target: KIP-848's
incremental (cooperative) reconciliation, as one table and one transition function.

A member never gets a partition another member still owns: the group's target may move
partition P from A to B at epoch e, but B is given P only once A has said (in a heartbeat's
``owned`` list) that it no longer owns P. Until then P is in A's ``revoking`` and in B's
target only: B is UNRELEASED_PARTITIONS. A member that must revoke stays at its old member
epoch until it has, so a commit it makes meanwhile is judged by the generation in which it
was given the partition (``owns``).

    state                   condition (at a heartbeat)              next
    STABLE                  member epoch == target epoch            STABLE (nothing to do)
    STABLE                  member epoch <  target epoch            step toward the target
    UNREVOKED_PARTITIONS    still owns a partition it must revoke   UNREVOKED_PARTITIONS
                            (or did not say what it owns)
    UNREVOKED_PARTITIONS    revoked them all                        step toward the target
    UNRELEASED_PARTITIONS   always                                  step toward the target

and a step toward the target gives

    UNREVOKED_PARTITIONS    if it owns partitions outside its target (keeps its epoch)
    UNRELEASED_PARTITIONS   else if part of its target is still owned by others (target epoch)
    STABLE                  else (target epoch)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from twinlog.engine.base.types import TopicPartition


class MemberState(Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True)
class MemberAssignment:
    """Invariants (asserted): ``assigned`` and ``revoking`` are disjoint; the state is
    UNREVOKED_PARTITIONS exactly when ``revoking`` is not empty; every partition's
    assignment epoch is at most ``member_epoch``.

    ``assigned`` and ``revoking`` map each partition to the member epoch in which this
    member was given it (its assignment epoch): a commit for it from an older epoch is a
    zombie's.
    """

    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    assigned: Mapping[TopicPartition, int] = field(default_factory=lambda: MappingProxyType({}))
    revoking: Mapping[TopicPartition, int] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        assert not (self.assigned.keys() & self.revoking.keys()), "assigned and revoking overlap"
        assert (self.state is MemberState.UNREVOKED_PARTITIONS) == bool(self.revoking)
        assert all(epoch <= self.member_epoch for epoch in self.assigned.values())
        assert all(epoch <= self.member_epoch for epoch in self.revoking.values())

    def owned(self) -> frozenset[TopicPartition]:
        """Every partition this member may still hold: assigned, or told to revoke but
        not yet revoked."""
        return frozenset(self.assigned) | frozenset(self.revoking)

    def owns(self, partition: TopicPartition) -> int | None:
        """The epoch in which this member was given ``partition``; None if it does not own it."""
        epoch = self.assigned.get(partition)
        return self.revoking.get(partition) if epoch is None else epoch


# Whether a heartbeat makes the member take a step toward its target, per state.
_STEPS: dict[
    MemberState, Callable[[MemberAssignment, int, frozenset[TopicPartition] | None], bool]
] = {
    MemberState.STABLE: lambda current, target_epoch, _reported: (
        current.member_epoch < target_epoch
    ),
    MemberState.UNREVOKED_PARTITIONS: lambda current, _target_epoch, reported: (
        reported is not None and not (reported & current.revoking.keys())
    ),
    MemberState.UNRELEASED_PARTITIONS: lambda _current, _target_epoch, _reported: True,
}


def reconcile(
    current: MemberAssignment,
    target: frozenset[TopicPartition],
    target_epoch: int,
    owned_by_others: Callable[[TopicPartition], bool],
    reported: frozenset[TopicPartition] | None,
) -> MemberAssignment:
    """The member's assignment after a heartbeat that ``reported`` what it owns (None:
    it did not say), given its ``target`` at ``target_epoch``; the table above."""
    if not _STEPS[current.state](current, target_epoch, reported):
        return current
    retained = {p: epoch for p, epoch in current.assigned.items() if p in target}
    to_revoke = {p: epoch for p, epoch in current.assigned.items() if p not in target}
    if to_revoke:
        return MemberAssignment(
            MemberState.UNREVOKED_PARTITIONS,
            current.member_epoch,
            MappingProxyType(retained),
            MappingProxyType(to_revoke),
        )
    unreleased = False
    for partition in sorted(target - retained.keys()):
        if owned_by_others(partition):
            unreleased = True
        else:
            retained[partition] = target_epoch
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return MemberAssignment(state, target_epoch, MappingProxyType(retained))
