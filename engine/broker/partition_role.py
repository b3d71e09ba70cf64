"""What a broker is to one partition: its leader, a follower, or nothing yet.

A single node is a cluster of one (its sole member leads every partition, ISR {itself}),
so these roles are the only ones, on one node as on three.

    NONE      before the cluster's word (the sole member's, or ZooKeeper's): serves nothing
    LEADER    takes produce and serves consumers and followers at ``leader_epoch``; the
              high watermark is what every in-sync replica holds (``replica_set``)
    FOLLOWER  copies ``leader_id``'s log at ``leader_epoch``; serves no client

Roles come from the partition's state in the cluster's metadata (ZooKeeper), in
increasing leader epoch: an older epoch than the one held is ignored (a late watch), the
same epoch again only updates the ISR. The one transition function is ``next_role``;
its table:

    held \\ asked         LEADER(e)                 FOLLOWER(e)
    NONE                 take it                   take it
    LEADER(h)            e > h: new term           e > h: step down
                         e == h: ISR update        e == h: impossible (the controller
                                                   never names two leaders in one epoch)
    FOLLOWER(h)          e > h: promotion          e > h: new leader
                         e <= h: stale, ignored    e <= h: stale, ignored
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

NO_LEADER = -1


class Role(enum.Enum):
    NONE = "none"
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(frozen=True)
class PartitionRole:
    role: Role
    leader_id: int = NO_LEADER
    leader_epoch: int = -1

    @property
    def serves_clients(self) -> bool:
        return self.role is Role.LEADER


NO_ROLE = PartitionRole(Role.NONE)


class Transition(enum.Enum):
    IGNORE = "ignore"  # stale: an epoch older than the one held
    UPDATE = "update"  # same leader, same epoch: the ISR changed
    LEAD = "lead"  # a new term as leader
    FOLLOW = "follow"  # follow a (new) leader


def next_role(held: PartitionRole, asked: PartitionRole) -> Transition:
    """The table above, as code: what to do when the metadata asks for ``asked``."""
    assert asked.role in (Role.LEADER, Role.FOLLOWER), asked
    if held.role is Role.NONE or asked.leader_epoch > held.leader_epoch:
        return Transition.LEAD if asked.role is Role.LEADER else Transition.FOLLOW
    if asked.leader_epoch < held.leader_epoch:
        return Transition.IGNORE
    if held.role is Role.LEADER and asked.role is Role.LEADER:
        return Transition.UPDATE
    assert not (held.role is Role.LEADER and asked.role is Role.FOLLOWER), (
        f"epoch {asked.leader_epoch} has two leaders: this broker and {asked.leader_id}"
    )
    return Transition.IGNORE  # a follower told again what it knows
