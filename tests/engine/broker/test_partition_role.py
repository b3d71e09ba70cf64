"""The one transition function of a partition's role (``partition_role.next_role``): every
row of its table."""

from __future__ import annotations

import pytest

from twinlog.engine.broker.partition_role import (
    NO_ROLE,
    PartitionRole,
    Role,
    Transition,
    next_role,
)


def leader(epoch: int, broker: int = 1) -> PartitionRole:
    return PartitionRole(Role.LEADER, broker, epoch)


def follower(epoch: int, leader_id: int = 2) -> PartitionRole:
    return PartitionRole(Role.FOLLOWER, leader_id, epoch)


@pytest.mark.parametrize(
    ("held", "asked", "expected"),
    [
        (NO_ROLE, leader(0), Transition.LEAD),
        (NO_ROLE, follower(0), Transition.FOLLOW),
        (leader(3), leader(4), Transition.LEAD),
        (leader(3), leader(3), Transition.UPDATE),
        (leader(3), follower(4), Transition.FOLLOW),
        (leader(3), leader(2), Transition.IGNORE),
        (leader(3), follower(2), Transition.IGNORE),
        (follower(3), leader(4), Transition.LEAD),
        (follower(3), follower(4, leader_id=3), Transition.FOLLOW),
        (follower(3), follower(3), Transition.IGNORE),
        (follower(3), leader(3), Transition.IGNORE),
        (follower(3), leader(1), Transition.IGNORE),
    ],
)
def test_every_row(held: PartitionRole, asked: PartitionRole, expected: Transition) -> None:
    assert next_role(held, asked) is expected


def test_impossible_rows_are_assertions() -> None:
    with pytest.raises(AssertionError, match="two leaders"):
        next_role(leader(3), follower(3))
