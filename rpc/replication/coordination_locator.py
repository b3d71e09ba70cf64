"""Where a partition's leader and a transaction's coordinator are, as the coordination
client asks (``coordination_client``): ``LeaderLocator``, and its answer ``Location``.

The locator a cluster broker uses reads ZooKeeper through the broker's one cluster view
(``rpc.cluster.leader_locator.ZooKeeperLeaderLocator``); tests pass small fakes.

A leader counts only while it is registered (live): a partition whose leader is offline,
unregistered or not chosen yet has no location (None). A partition that does not exist
in the cluster (a deleted topic) is ``GONE``, only ever from a read that succeeded.

Thread rule: any thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from twinlog.engine.base.types import TopicPartition


@dataclass(frozen=True)
class Location:
    """A partition's live leader and its leader epoch."""

    broker_id: int
    leader_epoch: int

    @property
    def gone(self) -> bool:
        return self.broker_id == GONE.broker_id


# The partition does not exist in the cluster (its topic was deleted, or has fewer
# partitions): the answer of a read that succeeded, never a guess.
GONE = Location(-2, -1)


class LeaderLocator(Protocol):
    """What ``coordination_client`` asks: None means no live leader is known."""

    def partition_leader(
        self, topic_partition: TopicPartition, refresh: bool = False
    ) -> Location | None:
        """The live leader, GONE, or None (no live leader, or it could not be read).

        ``refresh``: an answer read after this call began, never an older cached one."""
        ...

    def coordinator(self, coordinator_partition: int, refresh: bool = False) -> int | None:
        """The broker id of coordinator ``coordinator_partition``."""
        ...


__all__ = ["GONE", "LeaderLocator", "Location"]
